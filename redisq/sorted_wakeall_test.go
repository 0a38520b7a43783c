package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestPullWaitersWokenForEveryKey: one call that makes several keys
// pullable (a housekeeping pass returning several batches) announces
// them once; every Pull waiting on a handle must get a key, not only the
// first one woken: a woken Pull that leased wakes the next, as a
// Dequeue does.
func TestPullWaitersWokenForEveryKey(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	o := redisq.Options{ManualRequeue: true, AckTimeout: time.Minute}
	s, err := redisq.OpenSorted[int64](ctx, srv.Client(), "wakeall", &redisq.SortedOptions{Options: o})
	require.NoError(t, err)
	defer s.Close()
	const keys = 3
	for i := range keys {
		require.NoError(t, s.Publish(ctx, int64(i), string(rune('a'+i)), []byte{byte(i)}))
	}
	bs, err := s.TryPull(keys)
	require.NoError(t, err)
	require.Len(t, bs, keys)

	// No Pull looks again unless woken: one left unwoken waits out its
	// context, long after the requeue, and gets nothing.
	got := make(chan []*queue.Batch[int64], keys)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for range keys {
		go func() {
			bs, _ := s.Pull(wctx, 1)
			got <- bs
		}()
	}
	require.Eventually(t, func() bool { return redisq.Waiting(s) == keys }, time.Minute, 10*time.Millisecond, "all wait")
	later, err := redisq.OpenSorted[int64](ctx, srv.Client(), "wakeall",
		&redisq.SortedOptions{Options: redisq.Options{ManualRequeue: true, Clock: &shiftedClock{d: time.Hour}}})
	require.NoError(t, err)
	defer later.Close()
	n, err := later.RequeueExpired()
	require.NoError(t, err)
	require.Equal(t, keys, n)
	pulled := 0
	for range keys {
		pulled += len(<-got)
	}
	require.Equal(t, keys, pulled, "keys pulled by the waiting Pulls once made pullable")
}
