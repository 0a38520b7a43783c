package redisq

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/walq/walq/redisq/internal/redistest"
)

// previousSorted runs op of the previous release's sorted library
// (2da6e9c, loaded on rdb) on the queue of s.
func previousSorted(t *testing.T, rdb *redis.Client, s *Sorted[int64], fn, op string, args ...any) any {
	t.Helper()
	argv := append([]any{s.wake, unixMicros(time.Now()), s.o.MaxDeliveries, "0", micros(s.o.AckTimeout), "1", op}, args...)
	v, err := rdb.FCall(context.Background(), previousSortedName+"_"+fn, s.keys, argv...).Result()
	require.NoError(t, err, "%s %s", fn, op)
	return v
}

// TestSortedPlaceholdersDowngrade: the placeholders this version writes in
// a sorted queue's hashes (held, scripts/sorted.lua) are neither counted
// nor read as values by a handle of the previous release sharing the
// queue: its stats count what this version's do, it pulls and acks this
// version's values, and this version then runs on.
func TestSortedPlaceholdersDowngrade(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	require.NoError(t, rdb.FunctionLoadReplace(ctx, previousSortedLibrary).Err())
	s, err := OpenSorted[int64](ctx, rdb, "downgrade-sorted", &SortedOptions{Options: Options{ManualRequeue: true, AckTimeout: time.Minute}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "a", []byte("a")))
	require.NoError(t, s.Publish(ctx, 2, "b", []byte("b")))
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.NoError(t, bs[0].DeadLetter("poison"))
	held, err := rdb.HGet(ctx, s.keys[1], "").Result()
	require.NoError(t, err)
	require.Len(t, held, 256, "val holds its placeholder")

	require.Equal(t, []any{int64(1), int64(1), int64(0), int64(1), int64(2), int64(1), int64(0), int64(0)},
		previousSorted(t, rdb, s, "settle", "stats"), "pending, pullable keys, batches, dead, published, pulled, acked, leased")
	r, _ := previousSorted(t, rdb, s, "grow", "pull", 10, "", "77", "78").([]any)
	got, _ := r[0].([]any)
	require.Len(t, got, 1, "one batch: key b")
	batch, _ := got[0].([]any)
	require.Equal(t, "b", batch[1])
	require.EqualValues(t, 0, previousSorted(t, rdb, s, "settle", "ack", "77"))
	require.Equal(t, []any{int64(0), int64(0), int64(0), int64(1), int64(2), int64(2), int64(1), int64(0)},
		previousSorted(t, rdb, s, "settle", "stats"))

	require.NoError(t, s.Publish(ctx, 3, "c", []byte("c")))
	st, err := s.StatsContext(ctx)
	require.NoError(t, err)
	require.Equal(t, [3]int{1, 1, 0}, [3]int{st.SortedPending, st.SortedDead, st.SortedBatches})
	ds, err := s.DeadValues(0, 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, "a", ds[0].Key)
}

// TestSortedUpgradeAdoptsQueue: a queue the previous release published to
// holds no placeholders; this version opens it as it stands (not as one
// whose keys were deleted), writes them at its first call that may
// write, and from then on reports a key deleted.
func TestSortedUpgradeAdoptsQueue(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	require.NoError(t, rdb.FunctionLoadReplace(ctx, previousSortedLibrary).Err())
	s, err := OpenSorted[int64](ctx, rdb, "upgrade-sorted", &SortedOptions{Options: Options{ManualRequeue: true}})
	require.NoError(t, err)
	require.NoError(t, s.Close()) // its housekeeping, which may write, stops: only its keys are used below
	for i, k := range []string{"a", "b"} {
		part, err := sortPart(int64(i))
		require.NoError(t, err)
		b, err := msgpack.Marshal(&sortedValue{Sort: part, At: time.Now().UnixNano(), Payload: []byte(k)})
		require.NoError(t, err)
		previousSorted(t, rdb, s, "grow", "publish", k, part, b)
	}
	n, err := rdb.HLen(ctx, s.keys[1]).Result()
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "the previous release writes no placeholder")

	s2, err := OpenSorted[int64](ctx, rdb, "upgrade-sorted", nil)
	require.NoError(t, err, "the previous release's queue opens")
	defer s2.Close()
	st, err := s2.StatsContext(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, st.SortedPending)
	bs, err := s2.TryPull(1)
	require.NoError(t, err)
	require.Equal(t, "a", string(bs[0].Values[0].Payload))
	require.NoError(t, bs[0].Ack())
	held, err := rdb.HGet(ctx, s.keys[1], "").Result()
	require.NoError(t, err)
	require.Len(t, held, 256, "val holds its placeholder once adopted")

	require.NoError(t, rdb.Del(ctx, s.keys[3]).Err()) // vreason
	_, err = s2.TryPull(1)
	require.ErrorContains(t, err, "queue key "+s.keys[3]+" was deleted")
}

// storedFields is the number of fields of the hash key but its
// placeholder (the field ”, see held in scripts/sorted.lua).
func storedFields(ctx context.Context, rdb redis.UniversalClient, key string) (int64, error) {
	n, err := rdb.HLen(ctx, key).Result()
	if err != nil {
		return 0, err
	}
	held, err := rdb.HExists(ctx, key, "").Result()
	if held {
		n--
	}
	return n, err
}

// heldReads are the HGETs of every call of a sorted queue that looks at
// its placeholders (held, scripts/sorted.lua): one per hash that holds one.
const heldReads = 5
