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

// settled is one kind of queue after one message (plain) or one batch
// (sorted) was delivered and its ack attempted: try and block deliver
// (TryDequeue or TryPull, Dequeue or Pull), ack acks the same delivery
// again.
type settled struct {
	ackErr error
	ack    func() error
	try    func() error
	block  func(context.Context) error
	close  func() error
	before int // operations counted before the ack
}

func plainSettled(t *testing.T, fs *faultfs.FS) settled {
	q := open(t, t.TempDir(), &queue.Options{FS: fs, ManualRequeue: true})
	_, err := q.Enqueue(context.Background(), []byte("v"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	s := settled{before: len(fs.Ops()), close: q.Close, ack: m.Ack}
	s.ackErr = m.Ack()
	s.try = func() error { _, err := q.TryDequeue(); return err }
	s.block = func(ctx context.Context) error { _, err := q.Dequeue(ctx); return err }
	return s
}

func sortedSettled(t *testing.T, fs *faultfs.FS) settled {
	q, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{Options: queue.Options{FS: fs, ManualRequeue: true}})
	require.NoError(t, err)
	require.NoError(t, q.Publish(context.Background(), 1, "k", []byte("v")))
	return pulledSettled(t, fs, q)
}

func windowedSettled(t *testing.T, fs *faultfs.FS) settled {
	clock := newFakeClock()
	q, err := queue.OpenWindowed(t.TempDir(), &queue.WindowOptions{Window: time.Minute,
		SortedOptions: queue.SortedOptions{Options: queue.Options{FS: fs, ManualRequeue: true, Clock: clock}}})
	require.NoError(t, err)
	require.NoError(t, q.Publish(context.Background(), "k", []byte("v")))
	clock.Advance(2 * time.Minute) // the key's window closes
	return pulledSettled(t, fs, q.Sorted)
}

// pulledSettled pulls q's one batch and acks it.
func pulledSettled[K queue.SortKey](t *testing.T, fs *faultfs.FS, q *queue.Sorted[K]) settled {
	bs, err := q.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	s := settled{before: len(fs.Ops()), close: q.Close, ack: bs[0].Ack}
	s.ackErr = bs[0].Ack()
	s.try = func() error { _, err := q.TryPull(10); return err }
	s.block = func(ctx context.Context) error { _, err := q.Pull(ctx, 10); return err }
	return s
}

// settledKinds opens each kind of queue twice: once on a healthy disk, to
// count the operations before the ack, then on a disk that fails the
// ack's first operation, which poisons the log. It returns the second.
func settledKinds(t *testing.T, open func(*testing.T, *faultfs.FS) settled) settled {
	dry := open(t, faultfs.New(0))
	require.NoError(t, dry.ackErr)
	require.NoError(t, dry.close())
	s := open(t, faultfs.New(dry.before+1))
	t.Cleanup(func() { _ = s.close() })
	require.ErrorIs(t, s.ackErr, faultfs.ErrInjected)
	return s
}

var poisonKinds = map[string]func(*testing.T, *faultfs.FS) settled{
	"plain":    plainSettled,
	"sorted":   sortedSettled,
	"windowed": windowedSettled,
}

// Every kind of queue, poisoned by a failed ack and holding nothing more
// to deliver, answers a delivery with the error that poisoned the log:
// never ErrEmpty, and never a blocking delivery that waits for a message
// no write can bring.
func TestDeliveryPoisonedLogEveryKind(t *testing.T) {
	for name, open := range poisonKinds {
		t.Run(name, func(t *testing.T) {
			s := settledKinds(t, open)
			err := s.try()
			require.NotErrorIs(t, err, queue.ErrEmpty, "a poisoned log said it is empty")
			require.ErrorIs(t, err, faultfs.ErrInjected)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // bounds a hang
			defer cancel()
			err = s.block(ctx)
			require.NotErrorIs(t, err, context.DeadlineExceeded, "the blocking delivery waited on a poisoned log")
			require.ErrorIs(t, err, faultfs.ErrInjected)
		})
	}
}

// Every kind of queue answers a settle on a poisoned log with the error
// that poisoned it before any refusal of its own: here the ack of a
// delivery whose ack failed, which the log's state no longer knows as
// acked or not.
func TestSettlePoisonedLogEveryKind(t *testing.T) {
	for name, open := range poisonKinds {
		t.Run(name, func(t *testing.T) {
			s := settledKinds(t, open)
			err := s.ack()
			require.NotErrorIs(t, err, queue.ErrLeaseLost, "a settle on a poisoned log was refused as if the log were healthy")
			require.ErrorIs(t, err, faultfs.ErrInjected)
		})
	}
}
