package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
)

// A delivery on a poisoned log fails with the error that poisoned it,
// also when what it would deliver is a message whose enqueue the failure
// kept from being written: it never says the queue is empty while Stats
// counts that message ready, and a blocking Dequeue does not wait for a
// message that can no longer come.
func TestDequeuePoisonedLog(t *testing.T) {
	// run opens a queue on a file system that fails its failAt-th
	// operation and makes one EnqueueAsync; it returns the queue, the
	// Pending and the operations counted before the call.
	run := func(t *testing.T, failAt int) (*queue.Queue, *queue.Pending, int) {
		fs := faultfs.New(failAt)
		q := open(t, t.TempDir(), &queue.Options{FS: fs, ManualRequeue: true})
		before := len(fs.Ops())
		p, err := q.EnqueueAsync(context.Background(), []byte("async"))
		require.NoError(t, err)
		return q, p, before
	}
	dry, p, before := run(t, 0)
	require.NoError(t, p.Wait(context.Background()))
	require.NoError(t, dry.Close())
	q, p, _ := run(t, before+1) // the commit's first operation fails
	defer q.Close()
	require.ErrorIs(t, p.Wait(context.Background()), faultfs.ErrInjected)

	_, err := q.TryDequeue()
	require.ErrorIs(t, err, faultfs.ErrInjected, "TryDequeue")
	_, err = q.DequeueBatch(context.Background(), 4)
	require.ErrorIs(t, err, faultfs.ErrInjected, "DequeueBatch")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // bounds a hang
	defer cancel()
	_, err = q.Dequeue(ctx)
	require.False(t, errors.Is(err, context.DeadlineExceeded), "Dequeue waited for a message that cannot come")
	require.ErrorIs(t, err, faultfs.ErrInjected, "Dequeue")
}
