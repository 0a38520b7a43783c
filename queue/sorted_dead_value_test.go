package queue_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestDeadValueFence: RequeueDeadValue and PurgeDeadValue act on the dead
// value named by its Seq and its PublishedAt, and refuse, with
// ErrNotFound and nothing changed, a name whose Seq holds a value
// published at another time, or no dead value at all.
func TestDeadValueFence(t *testing.T) {
	s := deadSorted(t, t.TempDir())
	defer s.Close()
	ds, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 3)

	tests := []struct {
		name string
		d    queue.DeadValue[int64]
	}{
		{"another publish time", func() queue.DeadValue[int64] {
			d := ds[0]
			d.PublishedAt = d.PublishedAt.Add(time.Nanosecond)
			return d
		}()},
		{"zero publish time", queue.DeadValue[int64]{Seq: ds[0].Seq}},
		{"no such seq", func() queue.DeadValue[int64] { d := ds[0]; d.Seq = ds[2].Seq + 1000; return d }()},
		{"another value's publish time", func() queue.DeadValue[int64] { d := ds[0]; d.PublishedAt = ds[1].PublishedAt; return d }()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, s.RequeueDeadValue(tt.d), queue.ErrNotFound)
			require.ErrorIs(t, s.PurgeDeadValue(tt.d), queue.ErrNotFound)
			now, err := s.DeadValues(0, 0)
			require.NoError(t, err)
			require.Equal(t, ds, now, "a refused name changed the dead set")
		})
	}

	require.NoError(t, s.RequeueDeadValue(ds[0]))
	require.ErrorIs(t, s.RequeueDeadValue(ds[0]), queue.ErrNotFound, "the value is pending now")
	require.NoError(t, s.PurgeDeadValue(ds[2]))
	require.ErrorIs(t, s.PurgeDeadValue(ds[2]), queue.ErrNotFound)
	left, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Equal(t, []queue.DeadValue[int64]{ds[1]}, left)
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.Equal(t, "a", bs[0].Key)
	require.Equal(t, ds[0].PublishedAt, bs[0].Values[0].PublishedAt)
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.RequeueDeadValue(ds[1]), queue.ErrClosed)
	require.ErrorIs(t, s.PurgeDeadValue(ds[1]), queue.ErrClosed)
}

// TestDeadValueNameSurvives: a dead value's name, read before, still names
// it after a clean reopen (replay), a compaction that copies it forward
// and cuts the log behind it (its move record), and a reopen from that
// snapshot: PublishedAt comes back to the nanosecond.
func TestDeadValueNameSurvives(t *testing.T) {
	dir := t.TempDir()
	o := queue.SortedOptions{Options: queue.Options{Sync: queue.SyncAlways, SegmentSize: 4096, MaxDeliveries: 1}}
	testhook.SetManualCompaction(&o.Options)
	ctx := context.Background()
	s, err := queue.OpenSorted[int64](dir, &o)
	require.NoError(t, err)
	for i := range int64(3) {
		require.NoError(t, s.Publish(ctx, i, "dead", []byte(fmt.Sprintf("dead%d|%s", i, bytes.Repeat([]byte("d"), 900)))))
	}
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.NoError(t, bs[0].Nack(0)) // one delivery: the values go dead
	before, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, before, 3)

	reopen := func(what string, want []queue.DeadValue[int64]) {
		t.Helper()
		require.NoError(t, s.Close())
		s, err = queue.OpenSorted[int64](dir, &o)
		require.NoError(t, err)
		now, err := s.DeadValues(0, 0)
		require.NoError(t, err)
		require.Equal(t, deadNames(want), deadNames(now), "after %s", what)
	}
	reopen("a replay of the log", before)
	for i := range 12 {
		require.NoError(t, s.Publish(ctx, 100, fmt.Sprint("busy", i), bytes.Repeat([]byte("b"), 3000)))
		bs, err := s.TryPull(10)
		require.NoError(t, err)
		require.NoError(t, bs[0].Ack())
	}
	first := s.Stats().Segments[0].FirstLSN
	require.NoError(t, s.Compact())
	st := s.Stats()
	require.Greater(t, st.Segments[0].FirstLSN, first, "the compaction did not cut the log behind the dead values")
	require.GreaterOrEqual(t, st.Moved, uint64(3), "the compaction did not copy the dead values forward")
	now, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Equal(t, deadNames(before), deadNames(now), "after the copy forward")
	reopen("a reopen from the snapshot and the moves", before)
	require.NoError(t, s.PurgeDeadValue(before[0]))
	require.NoError(t, s.RequeueDeadValue(before[1]))
	reopen("the purge and requeue", before[2:])
	require.NoError(t, s.Close())
}

// deadNames returns each dead value's name: its Seq and its PublishedAt in
// unix nanoseconds.
func deadNames(ds []queue.DeadValue[int64]) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmt.Sprintf("%d@%d", d.Seq, d.PublishedAt.UnixNano())
	}
	return out
}
