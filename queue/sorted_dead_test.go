package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// deadSorted returns a sorted queue whose dead set holds the values of
// keys a (sort 1, 2) and b (sort 3), dead-lettered by lease.
func deadSorted(t *testing.T, dir string) *queue.Sorted[int64] {
	t.Helper()
	ctx := context.Background()
	s, err := queue.OpenSorted[int64](dir, nil)
	require.NoError(t, err)
	for _, v := range []struct {
		sort int64
		key  string
	}{{1, "a"}, {2, "a"}, {3, "b"}} {
		require.NoError(t, s.Publish(ctx, v.sort, v.key, []byte(v.key+"-payload")))
	}
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 2)
	for _, b := range bs {
		r, err := queue.ParseBatchReceipt(b.Receipt.String())
		require.NoError(t, err)
		require.NoError(t, s.Extend(r, time.Minute))
		require.NoError(t, s.DeadLetter(r, "poison "+b.Key))
		require.ErrorIs(t, s.Ack(r), queue.ErrLeaseLost)
	}
	return s
}

// TestSortedDeadSet: dead values are listed, requeued and purged, and the
// changes survive a reopen (they are records in the log).
func TestSortedDeadSet(t *testing.T) {
	dir := t.TempDir()
	s := deadSorted(t, dir)
	ds, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 3)
	require.Equal(t, []int64{1, 2, 3}, []int64{ds[0].Sort, ds[1].Sort, ds[2].Sort})
	require.Equal(t, "a-payload", string(ds[0].Payload))
	require.Equal(t, "poison a", ds[0].Reason)
	require.Equal(t, 1, ds[0].Deliveries)
	page, err := s.DeadValues(ds[1].Seq, 1)
	require.NoError(t, err)
	require.Equal(t, []uint64{ds[1].Seq}, []uint64{page[0].Seq})
	require.Equal(t, 3, s.Stats().SortedDead)

	require.NoError(t, s.RequeueDead(ds[2].Seq))
	require.NoError(t, s.PurgeDead(ds[0].Seq))
	require.ErrorIs(t, s.PurgeDead(ds[0].Seq), queue.ErrNotFound)
	require.NoError(t, s.Close())

	s, err = queue.OpenSorted[int64](dir, nil)
	require.NoError(t, err)
	defer s.Close()
	st := s.Stats()
	require.Equal(t, 1, st.SortedDead)
	require.Equal(t, 1, st.SortedPending)
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Equal(t, "b", bs[0].Key)
	require.Equal(t, 1, bs[0].Values[0].Deliveries, "a requeued value's count starts over")
	require.NoError(t, bs[0].Ack())
	n, err := s.RequeueAllDead()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = s.PurgeAllDead()
	require.NoError(t, err)
	require.Equal(t, 0, n)
	require.Equal(t, 0, s.Stats().SortedDead)
}

func TestParseBatchReceipt(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{{"b12", 12, true}, {"12", 0, false}, {"b0", 0, false}, {"b", 0, false}, {"3.4", 0, false}, {"bx", 0, false}} {
		t.Run(c.in, func(t *testing.T) {
			r, err := queue.ParseBatchReceipt(c.in)
			if !c.ok {
				require.ErrorIs(t, err, queue.ErrInvalidOptions)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, r.Lease)
			require.Equal(t, c.in, r.String())
		})
	}
}
