package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
)

// A consumer that found nothing counts itself as a waiter only after that
// first look. A message written in between, whose producer then sees no
// waiter and wakes nobody, must still be found: the consumer looks again
// once counted. The seam, run in that gap, appends and writes an enqueue
// record there and wakes nobody, every round.
func TestDequeueFindsWriteBeforeItCounts(t *testing.T) {
	q, err := Open(t.TempDir(), &Options{Sync: SyncNever})
	require.NoError(t, err)
	defer q.Close()
	var round int
	produced := false
	q.foundNothing = func() { // under q.mu
		if produced {
			return
		}
		produced = true
		r := record{Op: opEnqueue, ID: "m", At: q.now(), Payload: []byte{byte(round)}}
		_, err := q.appendLocked(&r, nil)
		require.NoError(t, err)
		require.NoError(t, q.log.Flush())
	}
	ctx := context.Background()
	for round = range 50 {
		q.mu.Lock()
		produced = false
		q.mu.Unlock()
		got := make(chan *Message, 1)
		go func() {
			m, err := q.Dequeue(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- m
		}()
		select {
		case m := <-got:
			require.Equal(t, []byte{byte(round)}, m.Payload)
			require.NoError(t, m.Ack())
		case <-time.After(5 * time.Second):
			q.Close() // wakes the consumer
			t.Fatalf("round %d: the consumer slept through a message written before it counted itself", round)
		}
	}
}

// A consumer asleep when an Enqueue's write fails, poisoning the log,
// wakes and returns that error: the message it would wait for can no
// longer come.
func TestDequeueWakesOnPoison(t *testing.T) {
	// run opens a queue on a file system that fails its failAt-th
	// operation, puts a consumer to sleep on it, then makes an Enqueue;
	// it returns the Enqueue's and the consumer's errors, and the
	// operations counted before the Enqueue.
	run := func(t *testing.T, failAt int) (enqErr, deqErr error, before int) {
		fs := faultfs.New(failAt)
		q, err := Open(t.TempDir(), &Options{FS: fs, ManualRequeue: true})
		require.NoError(t, err)
		defer q.Close()
		looks := 0
		asleep := make(chan struct{})
		q.foundNothing = func() { // under q.mu, at each of the two looks
			if looks++; looks == 2 {
				close(asleep)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // bounds a hang
		defer cancel()
		got := make(chan error, 1)
		go func() {
			m, err := q.Dequeue(ctx)
			if err == nil {
				err = m.Ack()
			}
			got <- err
		}()
		<-asleep
		before = len(fs.Ops())
		_, enqErr = q.Enqueue(context.Background(), []byte("m"))
		return enqErr, <-got, before
	}
	enqErr, deqErr, before := run(t, 0)
	require.NoError(t, enqErr)
	require.NoError(t, deqErr)
	enqErr, deqErr, _ = run(t, before+1) // the Enqueue's first operation fails
	require.ErrorIs(t, enqErr, faultfs.ErrInjected)
	require.NotErrorIs(t, deqErr, context.DeadlineExceeded, "the consumer slept on")
	require.ErrorIs(t, deqErr, faultfs.ErrInjected)
}
