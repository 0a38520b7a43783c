package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/leakcheck"
	"github.com/walq/walq/queue"
)

// Close stops the queue's background goroutines and waits for them, as
// the package documentation says: after queues of every kind and sync
// mode were opened, used (a lease pending expiry, a delayed message, an
// asynchronous enqueue, a consumer asleep) and closed, no goroutine of
// theirs is left.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	ctx := context.Background()
	for _, sync := range []queue.SyncMode{queue.SyncAlways, queue.SyncInterval, queue.SyncNever} {
		o := queue.Options{Sync: sync, AckTimeout: time.Hour}
		q := open(t, t.TempDir(), &o)
		enqueue(t, q, "leased")
		enqueue(t, q, "later", queue.WithDelay(time.Hour))
		tryDequeue(t, q)
		p, err := q.EnqueueAsync(ctx, []byte("async"))
		require.NoError(t, err)
		require.NoError(t, p.Wait(ctx))
		tryDequeue(t, q) // "async": two leases pending expiry
		consumer := make(chan error, 1)
		go func() { _, err := q.Dequeue(ctx); consumer <- err }()
		require.NoError(t, q.Close())
		require.ErrorIs(t, <-consumer, queue.ErrClosed)

		s, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{Options: o})
		require.NoError(t, err)
		require.NoError(t, s.Publish(ctx, 1, "k", []byte("v")))
		_, err = s.TryPull(10)
		require.NoError(t, err)
		require.NoError(t, s.Close())

		w, err := queue.OpenWindowed(t.TempDir(), &queue.WindowOptions{SortedOptions: queue.SortedOptions{Options: o}, Window: time.Hour})
		require.NoError(t, err)
		require.NoError(t, w.Publish(ctx, "k", []byte("v")))
		puller := make(chan error, 1)
		go func() { _, err := w.Pull(ctx, 10); puller <- err }()
		require.NoError(t, w.Close())
		require.ErrorIs(t, <-puller, queue.ErrClosed)
	}
	// Goroutines of earlier tests may still be ending: each one of the
	// queue's or the log's is given leakcheck.Grace.
	if left := leakcheck.WaitInTest(leakcheck.Grace, ownPackages...); left != "" {
		t.Fatalf("goroutines of the queue or its log still running after every queue was closed:\n%s", left)
	}
}
