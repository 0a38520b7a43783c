package redisq

import (
	"context"
	_ "embed"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/walq/walq/internal/sortkey"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// The sorted library of the release before dead values recorded their
// key (2da6e9c), as FUNCTION LOAD takes it: handles of both versions may
// share a queue during an upgrade.
var (
	//go:embed testdata/sorted-library-2da6e9c.lua
	previousSortedLibrary string
)

const previousSortedName = "walq_sorted_8ecda3b40f81e374"

// TestDeadValueOfPreviousVersion: a value dead-lettered by a handle of
// the previous version, which recorded no key for it, is listed with an
// empty Key and a reason saying so; RequeueDead refuses it with
// queue.ErrCorrupt and leaves it dead, RequeueAllDead requeues the others
// and reports it, and it can be purged.
func TestDeadValueOfPreviousVersion(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	require.NoError(t, rdb.FunctionLoadReplace(ctx, previousSortedLibrary).Err())
	s, err := OpenSorted[int64](ctx, rdb, "mixed-dead", nil)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "old", []byte("o")))
	require.NoError(t, s.Publish(ctx, 2, "new", []byte("n")))
	previous := func(fn, op string, args ...any) any {
		t.Helper()
		argv := append([]any{s.wake, unixMicros(time.Now()), s.o.MaxDeliveries, "0", micros(s.o.AckTimeout), "1", op}, args...)
		v, err := rdb.FCall(ctx, previousSortedName+"_"+fn, s.keys, argv...).Result()
		require.NoError(t, err)
		return v
	}
	r, _ := previous("grow", "pull", 1, "", "77").([]any)
	got, _ := r[0].([]any)
	require.Len(t, got, 1)
	require.EqualValues(t, 0, previous("settle", "dead", "77", "old poison"))
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Equal(t, "new", bs[0].Key)
	require.NoError(t, bs[0].DeadLetter("new poison"))

	ds, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 2)
	require.Empty(t, ds[0].Key)
	require.Equal(t, "old poison; "+noKeyReason, ds[0].Reason)
	require.Equal(t, int64(1), ds[0].Sort)
	require.Equal(t, []byte("o"), ds[0].Payload)
	require.Equal(t, "new", ds[1].Key)
	require.ErrorIs(t, s.RequeueDead(ds[0].Seq), queue.ErrCorrupt)
	require.ErrorIs(t, s.RequeueDeadValue(ds[0]), queue.ErrCorrupt)
	n, err := s.RequeueAllDead()
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.Equal(t, 1, n)
	st := s.Stats()
	require.Equal(t, [2]int{1, 1}, [2]int{st.SortedDead, st.SortedPending})
	require.NoError(t, s.PurgeDeadValue(ds[0]))
	require.Zero(t, s.Stats().SortedDead)
	kept, err := storedFields(ctx, rdb, s.keys[1])
	require.NoError(t, err)
	require.EqualValues(t, 1, kept, "only the pending value's payload is left")
}

// TestStoredValueLayout pins the bytes of a stored value that the
// server's fence reads (publishedAt in scripts/sorted.lua): a msgpack
// array of three, the sort part as bin, then the publish time as an
// int64 (d3 and 8 bytes, big-endian), for sort parts of each length
// class.
func TestStoredValueLayout(t *testing.T) {
	at := time.Date(2026, 12, 2, 21, 0, 0, 123456789, time.UTC).UnixNano()
	for _, c := range []struct {
		name string
		part []byte
		head []byte
	}{
		{"int", sortkey.OrderedInt(-5), []byte{0x93, 0xc4, 8}},
		{"string, bin16", make([]byte, 300), []byte{0x93, 0xc5, 1, 44}},
		{"string, bin32", make([]byte, 70000), []byte{0x93, 0xc6, 0, 1, 0x11, 0x70}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := msgpack.Marshal(&sortedValue{Sort: c.part, At: at, Payload: []byte("p")})
			require.NoError(t, err)
			require.Equal(t, c.head, b[:len(c.head)])
			off := len(c.head) + len(c.part)
			require.Equal(t, byte(0xd3), b[off])
			require.Equal(t, uint64(at), binary.BigEndian.Uint64(b[off+1:off+9]))
		})
	}
}

// TestDeadValueFenceLongSortKeys: the server's fence reads the publish
// time behind sort parts of every length class (bin8, bin16, bin32): a
// dead value named with its publish time is requeued, and one named with
// another time is not found.
func TestDeadValueFenceLongSortKeys(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := OpenSorted[string](ctx, srv.Client(), "fence-long", nil)
	require.NoError(t, err)
	defer s.Close()
	for i, n := range []int{3, 300, 70000} {
		require.NoError(t, s.Publish(ctx, strings.Repeat("s", n), string(rune('a'+i)), []byte("p")))
	}
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 3)
	for _, b := range bs {
		require.NoError(t, b.DeadLetter("x"))
	}
	ds, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 3)
	for _, d := range ds {
		other := d
		other.PublishedAt = d.PublishedAt.Add(time.Nanosecond)
		require.ErrorIs(t, s.RequeueDeadValue(other), queue.ErrNotFound, "sort key of %d bytes", len(d.Sort))
		require.NoError(t, s.RequeueDeadValue(d), "sort key of %d bytes", len(d.Sort))
	}
	require.Equal(t, 3, s.Stats().SortedPending)
}

// TestSortedDeadWrongTypeKey is TestSortedWrongTypeKey for the changes of
// the dead set: with any key of the queue overwritten with another type,
// DeadValues, RequeueDead, PurgeDead, RequeueAllDead and PurgeAllDead
// each succeed or fail with an error naming that key, and, once the key
// is restored, every value is dead or pending exactly once, or purged
// with its payload: none is left neither dead nor pending, as a change
// that failed after its first write (a requeue after the value left the
// dead set) would leave it.
func TestSortedDeadWrongTypeKey(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	names := []string{"seq", "val", "vinfo", "vreason", "pend", "order", "pos", "batch", "bdue", "flight", "hold", "dead", "stats", "age"}
	for _, f := range keyFaults(names, 12) {
		t.Run(f.name, func(t *testing.T) {
			s, err := OpenSorted[int64](ctx, rdb, "dead-wrongtype-"+f.name, &SortedOptions{Options: Options{ManualRequeue: true}})
			require.NoError(t, err)
			defer s.Close()
			payloads := []string{"a", "b", "c", "d"}
			for i, p := range payloads {
				require.NoError(t, s.Publish(ctx, int64(i), p, []byte(p)))
			}
			bs, err := s.TryPull(10)
			require.NoError(t, err)
			for _, b := range bs {
				require.NoError(t, b.DeadLetter("x"))
			}
			ds, err := s.DeadValues(0, 0)
			require.NoError(t, err)
			require.Len(t, ds, 4)

			key := s.keys[f.key]
			saved := f.spoil(ctx, t, rdb, key)
			check := func(what string, err error) {
				t.Helper()
				if err != nil {
					require.ErrorContains(t, err, key, what)
				}
			}
			_, err = s.DeadValues(0, 0)
			check("list", err)
			check("requeue", s.RequeueDead(ds[0].Seq))
			check("purge", s.PurgeDeadValue(ds[1]))
			_, err = s.RequeueAllDead()
			check("requeue all", err)
			_, err = s.PurgeAllDead()
			check("purge all", err)
			putBack(t, rdb, key, saved)

			seen := map[string]int{}
			left, err := s.DeadValues(0, 0)
			require.NoError(t, err)
			for _, d := range left {
				seen[string(d.Payload)]++
			}
			for {
				bs, err := s.TryPull(10)
				if err == queue.ErrEmpty {
					break
				}
				require.NoError(t, err)
				for _, b := range bs {
					for _, v := range b.Values {
						seen[string(v.Payload)]++
					}
					require.NoError(t, b.Ack())
				}
			}
			stored, err := storedFields(ctx, rdb, s.keys[1])
			require.NoError(t, err)
			for _, p := range payloads {
				require.LessOrEqual(t, seen[p], 1, "%s both dead and pending", p)
			}
			require.EqualValues(t, len(left), stored, "a value neither dead nor pending kept its payload: %v", seen)
		})
	}
}
