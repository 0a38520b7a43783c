package queue_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// errHeldSync is the failure a heldSync's held fsync may return.
var errHeldSync = errors.New("held fsync failed")

// heldSync is the real file system, but it can hold the next fsync of a
// log segment until released, then let it succeed or fail.
type heldSync struct {
	wal.OSFS
	mu    sync.Mutex
	armed bool          // the next segment fsync is held
	fail  error         // what the held fsync returns; nil: its real outcome
	held  chan struct{} // closed once the held fsync waits
	freed chan struct{} // closed to let it go on
}

// hold arms the gate: the next fsync of a log segment waits for release,
// then returns fail, or its own outcome when fail is nil.
func (g *heldSync) hold(fail error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.fail, g.held, g.freed = true, fail, make(chan struct{}), make(chan struct{})
}

func (g *heldSync) release() { close(g.freed) }

// wait holds the fsync if it is the armed one, and returns the failure
// to report instead of fsyncing, if any.
func (g *heldSync) wait() error {
	g.mu.Lock()
	hold, fail, held, freed := g.armed, g.fail, g.held, g.freed
	g.armed = false
	g.mu.Unlock()
	if !hold {
		return nil
	}
	close(held)
	<-freed
	return fail
}

func (g *heldSync) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	f, err := g.OSFS.OpenFile(name, flag, perm)
	return g.wrap(name, f, err)
}

func (g *heldSync) Open(name string) (wal.File, error) {
	f, err := g.OSFS.Open(name)
	return g.wrap(name, f, err)
}

// wrap gates the fsyncs of f, opened as name, if it is a log segment.
func (g *heldSync) wrap(name string, f wal.File, err error) (wal.File, error) {
	if err != nil || filepath.Base(filepath.Dir(name)) != "log" {
		return f, err
	}
	return heldSyncFile{File: f, g: g}, nil
}

// heldSyncFile is a segment file whose next fsync the gate may hold.
type heldSyncFile struct {
	wal.File
	g *heldSync
}

func (f heldSyncFile) Sync() error {
	if err := f.g.wait(); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f heldSyncFile) Datasync() error {
	if err := f.g.wait(); err != nil {
		return err
	}
	return f.File.Datasync()
}

// deadLines is a Logger that sends the id of each "queue: message
// dead-lettered" line to the channel it returns.
func deadLines() (*slog.Logger, <-chan string) {
	ch := make(chan string, 16)
	h := funcHandler{func(r slog.Record) {
		if r.Message != "queue: message dead-lettered" {
			return
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "id" {
				ch <- a.Value.String()
			}
			return true
		})
	}}
	return slog.New(h), ch
}

// deadOnNextLook opens a queue under SyncAlways with MaxDeliveries 1 in
// which "a" was delivered and nacked (the next look dead-letters it) and
// "b" was never delivered (the next look leases it).
func deadOnNextLook(t *testing.T, g *heldSync, clk *fakeclock.Clock, logger *slog.Logger) *queue.Queue {
	t.Helper()
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{MaxDeliveries: -1, ManualRequeue: true, Clock: clk})
	enqueue(t, q, "pa", queue.WithID("a"))
	enqueue(t, q, "pb", queue.WithID("b"))
	m := tryDequeue(t, q)
	require.Equal(t, "a", m.ID)
	require.NoError(t, m.Nack(0)) // not past the limit: no limit in this open
	require.NoError(t, q.Close())
	return open(t, dir, &queue.Options{FS: g, Sync: queue.SyncAlways, MaxDeliveries: 1,
		ManualRequeue: true, AckTimeout: time.Minute, Clock: clk, Logger: logger})
}

// dequeued is the outcome of a Dequeue run on a goroutine of its own.
type dequeued struct {
	m   *queue.Message
	err error
}

func dequeueAsync(q *queue.Queue) <-chan dequeued {
	out := make(chan dequeued, 1)
	go func() {
		m, err := q.Dequeue(context.Background())
		out <- dequeued{m, err}
	}()
	return out
}

// A Dequeue whose look dead-letters a message past MaxDeliveries on its
// way hands over its lease without waiting for the fsync of that
// dead-lettering, which its own contract does not need (the lease only
// waits for its write): while that fsync hangs, Dequeue returns the next
// message with its whole lease to run, and its ack succeeds. The Logger
// hears of the dead-lettering only once the fsync returns, so that a
// power loss cannot undo a dead-lettering it was told of.
func TestDeliveryDeadLoggedAfterFsyncWithoutWaiting(t *testing.T) {
	g := &heldSync{}
	clk := newFakeClock()
	logger, lines := deadLines()
	q := deadOnNextLook(t, g, clk, logger)
	g.hold(nil)
	d := dequeueWhileHeld(t, g, clk, dequeueAsync(q))
	require.NoError(t, d.err)
	require.Equal(t, "b", d.m.ID)
	require.True(t, d.m.DeliveredAt.Equal(clk.Now()), "the lease starts when it is handed over, not %s", d.m.DeliveredAt)
	select {
	case id := <-lines:
		t.Fatalf("dead-lettering of %s logged before its fsync returned", id)
	case <-time.After(50 * time.Millisecond):
	}
	g.release()
	select {
	case id := <-lines:
		require.Equal(t, "a", id)
	case <-time.After(10 * time.Second):
		t.Fatal("dead-lettering of a not logged once its fsync returned")
	}
	require.NoError(t, d.m.Ack())
	require.NoError(t, q.Close())
	select {
	case id := <-lines:
		t.Fatalf("dead-lettering of %s logged a second time", id)
	default:
	}
}

// dequeueWhileHeld returns what the Dequeue run as got returns while the
// fsync g holds (the one covering its dead-lettering) hangs, once that
// fsync hangs. It fails the test if Dequeue waits for that fsync: it then
// moves clk past the lease time, as a hang would, and releases the
// fsync, to tell what such a Dequeue hands over.
func dequeueWhileHeld(t *testing.T, g *heldSync, clk *fakeclock.Clock, got <-chan dequeued) dequeued {
	t.Helper()
	var d dequeued
	select {
	case d = <-got:
	case <-g.held:
		select {
		case d = <-got:
		case <-time.After(5 * time.Second):
			clk.Advance(2 * time.Minute)
			g.release()
			d = <-got
			var ack error
			if d.m != nil {
				ack = d.m.Ack()
			}
			t.Fatalf("Dequeue did not return while the fsync of the dead-lettering it made hung "+
				"(it returned %s once the fsync did, err %v; its ack: %v)", leaseLeft(d.m, clk), d.err, ack)
		}
	}
	select {
	case <-g.held:
	case <-time.After(10 * time.Second):
		t.Fatal("no fsync covered the dead-lettering in 10 s")
	}
	return d
}

// leaseLeft describes how much of m's lease was left when it was handed
// over.
func leaseLeft(m *queue.Message, clk *fakeclock.Clock) string {
	if m == nil {
		return "no message"
	}
	left := m.DeliveredAt.Add(time.Minute).Sub(clk.Now())
	return m.ID + " with " + left.String() + " of its 1m0s lease left"
}

// When the fsync covering a delivery's dead-lettering fails, the Logger
// never hears of it (a power loss may undo it), the delivery has its
// message all the same (its lease was written), and the queue is
// poisoned: the next delivery returns the fsync's error, and Close too.
func TestDeliveryDeadNotLoggedWhenFsyncFails(t *testing.T) {
	g := &heldSync{}
	clk := newFakeClock()
	logger, lines := deadLines()
	q := deadOnNextLook(t, g, clk, logger)
	g.hold(errHeldSync)
	d := dequeueWhileHeld(t, g, clk, dequeueAsync(q))
	require.NoError(t, d.err)
	require.Equal(t, "b", d.m.ID)
	g.release()
	require.ErrorIs(t, d.m.Ack(), errHeldSync, "the ack waits for the fsync after the one that failed")
	_, err := q.TryDequeue()
	require.ErrorIs(t, err, errHeldSync, "the queue is poisoned")
	require.ErrorIs(t, q.Close(), errHeldSync)
	select {
	case id := <-lines:
		t.Fatalf("dead-lettering of %s logged though its fsync failed", id)
	default:
	}
}
