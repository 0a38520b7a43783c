package redisq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestShorterNackKeepsHold: without single flight a key can have two
// leased batches; a nack of the second with a shorter delay than the
// first's must not release the first batch's values before their delay
// (Batch.Nack: the key is not pulled again before delay has passed), as
// the embedded queue does not.
func TestShorterNackKeepsHold(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	clock := queuetest.NewClock()
	emb, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{
		Options: queue.Options{Sync: queue.SyncNever, Clock: clock, AckTimeout: time.Hour, ManualRequeue: true}})
	require.NoError(t, err)
	defer emb.Close()
	red, err := redisq.OpenSorted[int64](ctx, srv.Client(), t.Name(), &redisq.SortedOptions{
		Options: redisq.Options{ManualRequeue: true, Clock: noTimers{clock}, AckTimeout: time.Hour}})
	require.NoError(t, err)
	defer red.Close()
	for _, name := range []string{"embedded", "redis"} {
		e := map[string]queue.SortedQueue[int64]{"embedded": emb, "redis": red}[name]
		require.NoError(t, e.Publish(ctx, 1, "k", []byte("first")))
		b1, err := e.TryPull(10)
		require.NoError(t, err, name)
		require.NoError(t, e.Publish(ctx, 2, "k", []byte("second")))
		b2, err := e.TryPull(10)
		require.NoError(t, err, name)
		require.NoError(t, b1[0].Nack(time.Minute), name)
		require.NoError(t, b2[0].Nack(time.Second), name)
		clock.Advance(2 * time.Second)
		if _, err := e.TryPull(10); !errors.Is(err, queue.ErrEmpty) {
			t.Fatalf("%s: the first batch's values are pulled 2 s after a nack of a minute (%v)", name, err)
		}
		clock.Advance(-2 * time.Second)
	}
}
