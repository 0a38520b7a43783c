package redisq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestStatsCountsEndedHolds nacks a batch with a delay and steps the
// clock past it, with no pull or housekeeping between: Stats.SortedKeys
// counts the keys as pullable again on Redis as on the embedded queue,
// under single flight too. The Redis handle's clock has no timers, so
// that stepping it wakes no housekeeper, and the delay is longer than
// the idle recheck its housekeeper arms for as it opens (30s), so that
// its announcement does not wake it either.
func TestStatsCountsEndedHolds(t *testing.T) {
	srv := redistest.Start(t)
	for _, single := range []bool{false, true} {
		t.Run(map[bool]string{false: "many", true: "single"}[single], func(t *testing.T) {
			ctx := context.Background()
			clock := queuetest.NewClock()
			emb, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{SingleFlight: single,
				Options: queue.Options{Sync: queue.SyncNever, Clock: clock, AckTimeout: time.Minute}})
			require.NoError(t, err)
			defer emb.Close()
			red, err := redisq.OpenSorted[int64](ctx, srv.Client(), t.Name(), &redisq.SortedOptions{SingleFlight: single,
				Options: redisq.Options{ManualRequeue: true, Clock: noTimers{clock}, AckTimeout: time.Minute}})
			require.NoError(t, err)
			defer red.Close()
			engines := []queue.SortedQueue[int64]{emb, red}
			keys := func() [2]int { return [2]int{emb.Stats().SortedKeys, red.Stats().SortedKeys} }
			for _, e := range engines {
				require.NoError(t, e.Publish(ctx, 1, "a", []byte("x")))
				require.NoError(t, e.Publish(ctx, 2, "b", []byte("y")))
				bs, err := e.TryPull(2)
				require.NoError(t, err)
				require.Len(t, bs, 2)
				require.NoError(t, bs[0].Nack(time.Minute))
				require.NoError(t, bs[1].Nack(time.Minute))
			}
			require.Equal(t, [2]int{0, 0}, keys(), "both keys held")
			clock.Advance(2 * time.Minute)
			require.Equal(t, [2]int{2, 2}, keys(), "both holds ended")
		})
	}
}

// TestStatsCountsAtMostThousandEndedHolds: Stats.SortedKeys reads at
// most 1000 ended holds a call on Redis (as many as a pull or
// housekeeping pass releases), where the embedded queue counts every
// one; once a pull released those, the rest are counted.
func TestStatsCountsAtMostThousandEndedHolds(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	clock := queuetest.NewClock()
	emb, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{
		Options: queue.Options{Sync: queue.SyncNever, Clock: clock, AckTimeout: time.Hour}})
	require.NoError(t, err)
	defer emb.Close()
	red, err := redisq.OpenSorted[int64](ctx, srv.Client(), t.Name(), &redisq.SortedOptions{
		Options: redisq.Options{ManualRequeue: true, Clock: noTimers{clock}, AckTimeout: time.Hour}})
	require.NoError(t, err)
	defer red.Close()
	const keys = 1001
	for _, e := range []queue.SortedQueue[int64]{emb, red} {
		for i := range keys {
			require.NoError(t, e.Publish(ctx, int64(i), fmt.Sprintf("k%04d", i), []byte("v")))
		}
		bs, err := e.TryPull(keys)
		require.NoError(t, err)
		require.Len(t, bs, keys)
		for _, b := range bs {
			require.NoError(t, b.Nack(time.Minute))
		}
	}
	count := func() [2]int { return [2]int{emb.Stats().SortedKeys, red.Stats().SortedKeys} }
	require.Equal(t, [2]int{0, 0}, count(), "every key held")
	clock.Advance(2 * time.Minute)
	require.Equal(t, [2]int{keys, 1000}, count(), "Redis reads 1000 ended holds a call")
	for _, e := range []queue.SortedQueue[int64]{emb, red} {
		bs, err := e.TryPull(1)
		require.NoError(t, err)
		require.Len(t, bs, 1)
	}
	require.Equal(t, [2]int{keys - 1, keys - 1}, count(), "the pull released 1000; the rest are read")
}
