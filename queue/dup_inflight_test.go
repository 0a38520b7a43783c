package queue_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// errGateWrite is the failure writeGate gives the write it held.
var errGateWrite = errors.New("gate: write failed")

// writeGate is the real file system, but once armed it holds the log's
// next batch write until the test releases it, and that write then fails
// with err without writing a byte (err nil: it is made).
type writeGate struct {
	wal.OSFS
	err   error
	mu    sync.Mutex
	armed bool
	held  chan struct{} // closed once the armed write waits
	freed chan struct{} // closed to let it go on
}

func newWriteGate(err error) *writeGate {
	return &writeGate{err: err, held: make(chan struct{}), freed: make(chan struct{})}
}

func (g *writeGate) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

// StoreOp implements the log's hook for its store's own writes.
func (g *writeGate) StoreOp(op string) error {
	g.mu.Lock()
	hold := g.armed && op == wal.StoreWriteBatch
	if hold {
		g.armed = false
	}
	g.mu.Unlock()
	if !hold {
		return nil
	}
	close(g.held)
	<-g.freed
	return g.err
}

// A producer that retries an enqueue with its producer-given id while
// the first enqueue of the id is in flight (its Pending not complete: a
// Wait whose context ended, say) is not told ErrDuplicate before the
// first one's outcome is known: when the write of the first one fails,
// the retry reports that failure, as the first one's Pending does.
// ErrDuplicate would tell the producer the message is in the queue, and
// no reopen delivers it.
func TestEnqueueRetryWhileFirstInFlight(t *testing.T) {
	for retry, enq := range enqueueKinds {
		t.Run(retry, func(t *testing.T) {
			g := newWriteGate(errGateWrite)
			dir := t.TempDir()
			q := open(t, dir, &queue.Options{FS: g, ManualRequeue: true})
			g.arm()
			p, err := q.EnqueueAsync(context.Background(), []byte("v"), queue.WithID("order-42"))
			require.NoError(t, err)
			<-g.held // its write under way
			retried := make(chan error, 1)
			go func() { retried <- enq(q, "order-42") }()
			close(g.freed) // the write fails
			require.ErrorIs(t, p.Wait(context.Background()), errGateWrite)
			err = <-retried
			require.NotErrorIs(t, err, queue.ErrDuplicate, "the retry was refused as a duplicate of an enqueue that failed")
			require.ErrorIs(t, err, errGateWrite)
			_ = q.Close() // returns the poison

			q = open(t, dir, nil)
			defer q.Close()
			requireEmpty(t, q) // the first enqueue was never written
			require.NoError(t, enq(q, "order-42"), "the retry after the reopen")
			require.Equal(t, "order-42", tryDequeue(t, q).ID)
		})
	}
}
