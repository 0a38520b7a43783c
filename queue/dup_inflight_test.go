package queue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
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
			require.ErrorIs(t, q.Close(), errGateWrite, "Close returns the poison")

			q = open(t, dir, nil)
			defer q.Close()
			requireEmpty(t, q) // the first enqueue was never written
			require.NoError(t, enq(q, "order-42"), "the retry after the reopen")
			require.Equal(t, "order-42", tryDequeue(t, q).ID)
		})
	}
}

// endedCtx passes the entry check of a call (its first Err is nil) and
// has ended for everything after it: its Done is closed, and every later
// Err is context.Canceled. It stands for a caller whose context ends
// while the call waits, without a timer.
type endedCtx struct {
	context.Context
	mu    sync.Mutex
	calls int
}

func newEndedCtx() *endedCtx { return &endedCtx{Context: context.Background()} }

var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (c *endedCtx) Done() <-chan struct{} { return closedDone }

func (c *endedCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.calls == 1 {
		return nil
	}
	return context.Canceled
}

// A retry of an enqueue whose producer-given id is held by an enqueue in
// flight waits for that one's outcome; the caller's context bounds that
// wait, as it bounds EnqueueAsync's wait for room in the MaxPending
// window: the waiting call appends nothing, so an end of its context may
// end it. Here the holder's write hangs (a slow or stuck disk) and the
// retry's context has ended: the retry returns the context's error
// instead of hanging with the write.
func TestEnqueueRetryWaitEndsWithContext(t *testing.T) {
	calls := retryCalls()
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			g := newWriteGate(nil) // the held write is made once released
			q := open(t, t.TempDir(), &queue.Options{FS: g, ManualRequeue: true})
			defer q.Close()
			g.arm()
			p, err := q.EnqueueAsync(context.Background(), []byte("v"), queue.WithID("order-42"))
			require.NoError(t, err)
			<-g.held // the holder's write hangs
			retried := make(chan error, 1)
			go func() { retried <- call(newEndedCtx(), q) }()
			var got error
			ended := false
			select {
			case got = <-retried:
				ended = true
			case <-time.After(5 * time.Second): // a hang detector, not a measure of speed
			}
			close(g.freed)
			require.NoError(t, p.Wait(context.Background()))
			if !ended {
				got = <-retried
			}
			require.True(t, ended, "%s with an ended context still waited for the holder's stuck write (it returned %v only once the write was let go)", name, got)
			require.ErrorIs(t, got, context.Canceled)
		})
	}
}

// waitedCtx is a context that never ends and closes asked at the first
// call of its Done: when a call is about to wait on it.
type waitedCtx struct {
	context.Context
	once  sync.Once
	asked chan struct{}
}

func newWaitedCtx() *waitedCtx {
	return &waitedCtx{Context: context.Background(), asked: make(chan struct{})}
}

func (c *waitedCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.asked) })
	return c.Context.Done()
}

// gatedFaults is a faultfs.FS, which counts the operations, whose batch
// writes also pass the gate.
type gatedFaults struct {
	*faultfs.FS
	gate *writeGate
}

func (g gatedFaults) StoreOp(op string) error {
	if err := g.gate.StoreOp(op); err != nil {
		return err
	}
	return g.FS.StoreOp(op)
}

// fsyncs counts the fsyncs among ops.
func fsyncs(ops []faultfs.Op) int {
	n := 0
	for _, op := range ops {
		if op.Kind == "fsync" {
			n++
		}
	}
	return n
}

// Under SyncNever and SyncInterval an enqueue in flight is as durable as
// the mode promises once it is written: a retry that waits for it waits
// for that write, and makes no fsync of its own (an fsync per retry would
// cost every producer that retries what the mode was chosen to save).
func TestEnqueueRetryWaitMakesNoFsync(t *testing.T) {
	calls := retryCalls()
	modes := map[string]queue.SyncMode{"SyncNever": queue.SyncNever, "SyncInterval": queue.SyncInterval}
	for mode, sm := range modes {
		for name, call := range calls {
			t.Run(mode+"/"+name, func(t *testing.T) {
				fs := gatedFaults{FS: faultfs.New(0), gate: newWriteGate(nil)}
				// AppendOnly: the fsyncs counted are the calls', not those of the zeros ahead of the tail.
				q := open(t, t.TempDir(), &queue.Options{FS: fs, Sync: sm, SyncInterval: time.Hour, ManualRequeue: true, AppendOnly: true})
				defer q.Close()
				fs.gate.arm()
				p, err := q.EnqueueAsync(context.Background(), []byte("v"), queue.WithID("order-42"))
				require.NoError(t, err)
				<-fs.gate.held // the holder's write under way
				ctx := newWaitedCtx()
				retried := make(chan error, 1)
				go func() { retried <- call(ctx, q) }()
				select {
				case <-ctx.asked: // the retry waits for the holder
				case <-time.After(5 * time.Second): // a hang detector, not a measure of speed
					close(fs.gate.freed)
					t.Fatalf("the retry waited for the holder without its context (it returned %v once the write was let go)", <-retried)
				}
				before := fsyncs(fs.Ops())
				close(fs.gate.freed)
				require.ErrorIs(t, <-retried, queue.ErrDuplicate)
				require.Equal(t, before, fsyncs(fs.Ops()), "the retry's wait made an fsync")
				require.NoError(t, p.Wait(context.Background()))
			})
		}
	}
}

// retryCalls are the three enqueues of the producer-given id "order-42"
// that a retry may make, by name.
func retryCalls() map[string]func(ctx context.Context, q *queue.Queue) error {
	return map[string]func(ctx context.Context, q *queue.Queue) error{
		"EnqueueAsync": func(ctx context.Context, q *queue.Queue) error {
			_, err := q.EnqueueAsync(ctx, []byte("v"), queue.WithID("order-42"))
			return err
		},
		"Enqueue": func(ctx context.Context, q *queue.Queue) error {
			_, err := q.Enqueue(ctx, []byte("v"), queue.WithID("order-42"))
			return err
		},
		"EnqueueBatch": func(ctx context.Context, q *queue.Queue) error {
			_, err := q.EnqueueBatch(ctx, []queue.Item{{ID: "order-42", Payload: []byte("v")}})
			return err
		},
	}
}
