package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
)

// enqueueByID is one way to enqueue the message id: it returns the
// call's outcome, an asynchronous call's once its Pending completed.
type enqueueByID func(q *queue.Queue, id string) error

var enqueueKinds = map[string]enqueueByID{
	"Enqueue": func(q *queue.Queue, id string) error {
		_, err := q.Enqueue(context.Background(), []byte("v"), queue.WithID(id))
		return err
	},
	"EnqueueBatch": func(q *queue.Queue, id string) error {
		_, err := q.EnqueueBatch(context.Background(), []queue.Item{{ID: id, Payload: []byte("v")}})
		return err
	},
	"EnqueueAsync": func(q *queue.Queue, id string) error {
		p, err := q.EnqueueAsync(context.Background(), []byte("v"), queue.WithID(id))
		if err != nil {
			return err
		}
		return p.Wait(context.Background())
	},
}

// A producer that retries an enqueue whose write failed, with the same
// producer-given id, is told the error that poisoned the log, never
// ErrDuplicate: the failed enqueue is in no file, and ErrDuplicate tells
// a producer that the message is in the queue (it drops it, and the
// message is lost). The reopen shows it is not there, and takes the
// retry.
func TestEnqueueRetryPoisonedLog(t *testing.T) {
	for first, enq := range enqueueKinds {
		t.Run(first, func(t *testing.T) {
			// run opens a queue on a file system that fails its
			// failAt-th operation and enqueues "order-42"; it returns
			// the queue, its directory, the enqueue's outcome and the
			// operations counted before it.
			run := func(failAt int) (*queue.Queue, string, error, int) {
				fs := faultfs.New(failAt)
				dir := t.TempDir()
				q := open(t, dir, &queue.Options{FS: fs, ManualRequeue: true})
				before := len(fs.Ops())
				return q, dir, enq(q, "order-42"), before
			}
			dry, _, err, before := run(0)
			require.NoError(t, err)
			require.NoError(t, dry.Close())
			q, dir, err, _ := run(before + 1) // the enqueue's write fails
			require.ErrorIs(t, err, faultfs.ErrInjected)
			for retry, again := range enqueueKinds {
				err := again(q, "order-42")
				require.NotErrorIs(t, err, queue.ErrDuplicate, "%s retried: a poisoned log refused it as a duplicate", retry)
				require.ErrorIs(t, err, faultfs.ErrInjected, "%s retried", retry)
			}
			require.ErrorIs(t, q.Close(), faultfs.ErrInjected, "Close returns the poison")

			q = open(t, dir, nil)
			defer q.Close()
			requireEmpty(t, q) // the failed enqueue was never written
			require.NoError(t, enq(q, "order-42"), "the retry after the reopen")
			m := tryDequeue(t, q)
			require.Equal(t, "order-42", m.ID)
		})
	}
}

// A settle by id (AckID, NackID, ExtendID, DeadLetterID) on a poisoned
// log returns the error that poisoned it before a refusal of its own, as
// a settle by receipt does: here after an AckID whose write failed, which
// the state counts as acked but no file holds. ErrNotFound would tell the
// consumer that no delivery of the id is in flight, as if the ack had
// been made; the message is delivered again after the reopen.
func TestSettleByIDPoisonedLog(t *testing.T) {
	// run opens a queue on a file system that fails its failAt-th
	// operation, enqueues "a", delivers it and acks it by id; it returns
	// the queue, the ack's outcome and the operations counted before it.
	run := func(failAt int) (*queue.Queue, error, int) {
		fs := faultfs.New(failAt)
		q := open(t, t.TempDir(), &queue.Options{FS: fs, ManualRequeue: true})
		enqueue(t, q, "v", queue.WithID("a"))
		tryDequeue(t, q)
		before := len(fs.Ops())
		return q, q.AckID("a"), before
	}
	dry, err, before := run(0)
	require.NoError(t, err)
	require.NoError(t, dry.Close())
	q, err, _ := run(before + 1) // the ack's write fails
	defer q.Close()
	require.ErrorIs(t, err, faultfs.ErrInjected)
	for _, id := range []string{"a", "never-enqueued"} {
		for name, call := range map[string]func() error{
			"AckID":        func() error { return q.AckID(id) },
			"NackID":       func() error { return q.NackID(id, 0) },
			"ExtendID":     func() error { return q.ExtendID(id, time.Minute) },
			"DeadLetterID": func() error { return q.DeadLetterID(id, "why") },
		} {
			err := call()
			require.NotErrorIs(t, err, queue.ErrNotFound, "%s(%q) on a poisoned log was refused as if the log were healthy", name, id)
			require.ErrorIs(t, err, faultfs.ErrInjected, "%s(%q)", name, id)
		}
	}
}
