package queue_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/queue"
)

// errHeldSync is the failure a syncGate's held fsync returns when told to.
var errHeldSync = errors.New("held fsync failed")

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
func deadOnNextLook(t *testing.T, g *syncGate, clk *fakeclock.Clock, logger *slog.Logger) *queue.Queue {
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
	g := newSyncGate()
	clk := newFakeClock()
	logger, lines := deadLines()
	q := deadOnNextLook(t, g, clk, logger)
	g.armSync(nil)
	d := dequeueWhileHeld(t, g, clk, dequeueAsync(q))
	require.NoError(t, d.err)
	require.Equal(t, "b", d.m.ID)
	require.True(t, d.m.DeliveredAt.Equal(clk.Now()), "the lease starts when it is handed over, not %s", d.m.DeliveredAt)
	select {
	case id := <-lines:
		t.Fatalf("dead-lettering of %s logged before its fsync returned", id)
	case <-time.After(50 * time.Millisecond):
	}
	close(g.syncFreed)
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
func dequeueWhileHeld(t *testing.T, g *syncGate, clk *fakeclock.Clock, got <-chan dequeued) dequeued {
	t.Helper()
	var d dequeued
	select {
	case d = <-got:
	case <-g.syncHeld:
		select {
		case d = <-got:
		case <-time.After(5 * time.Second):
			clk.Advance(2 * time.Minute)
			close(g.syncFreed)
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
	case <-g.syncHeld:
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
	g := newSyncGate()
	clk := newFakeClock()
	logger, lines := deadLines()
	q := deadOnNextLook(t, g, clk, logger)
	g.armSync(errHeldSync)
	d := dequeueWhileHeld(t, g, clk, dequeueAsync(q))
	require.NoError(t, d.err)
	require.Equal(t, "b", d.m.ID)
	close(g.syncFreed)
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

// A look that only dead-letters (every ready message or value past
// MaxDeliveries, nothing left to lease) returns once its dead-letterings
// are written, as every call's change is before it returns: a kill -9
// after that keeps them. While the write of their records is held,
// TryDequeue and TryPull do not return ErrEmpty, nor Dequeue and Pull
// the end of their context (one that ended while they looked).
func TestDeadOnlyLookReturnsOnceWritten(t *testing.T) {
	dequeuer := func(t *testing.T, dir string, g *writeGate) *queue.Queue {
		q := open(t, dir, &queue.Options{MaxDeliveries: -1, ManualRequeue: true})
		enqueue(t, q, "pa")
		require.NoError(t, tryDequeue(t, q).Nack(0))
		require.NoError(t, q.Close())
		q = open(t, dir, &queue.Options{FS: g, MaxDeliveries: 1, ManualRequeue: true})
		t.Cleanup(func() { q.Close() })
		return q
	}
	puller := func(t *testing.T, dir string, g *writeGate) *queue.Sorted[int64] {
		s, err := queue.OpenSorted[int64](dir, nil)
		require.NoError(t, err)
		nackedOnce(t, s.Publish, s.TryPull, 1, 2)
		require.NoError(t, s.Close())
		s, err = queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: queue.Options{
			FS: g, MaxDeliveries: 1, ManualRequeue: true}})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	}
	cases := []struct {
		name string
		look func(t *testing.T, dir string, g *writeGate) func() error
		want error
	}{
		{"TryDequeue", func(t *testing.T, dir string, g *writeGate) func() error {
			q := dequeuer(t, dir, g)
			return func() error { _, err := q.TryDequeue(); return err }
		}, queue.ErrEmpty},
		{"Dequeue", func(t *testing.T, dir string, g *writeGate) func() error {
			q := dequeuer(t, dir, g)
			return func() error { _, err := q.Dequeue(newEndedCtx()); return err }
		}, context.Canceled},
		{"TryPull", func(t *testing.T, dir string, g *writeGate) func() error {
			s := puller(t, dir, g)
			return func() error { _, err := s.TryPull(10); return err }
		}, queue.ErrEmpty},
		{"Pull", func(t *testing.T, dir string, g *writeGate) func() error {
			s := puller(t, dir, g)
			return func() error { _, err := s.Pull(newEndedCtx(), 10); return err }
		}, context.Canceled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newWriteGate(nil)
			look := c.look(t, t.TempDir(), g)
			g.arm()
			done := make(chan error, 1)
			go func() { done <- look() }()
			select {
			case <-g.held:
			case <-time.After(10 * time.Second):
				t.Fatal("the dead-lettering was not written in 10 s")
			}
			select {
			case err := <-done:
				close(g.freed)
				t.Fatalf("the look returned (%v) while the write of its dead-lettering was held", err)
			case <-time.After(50 * time.Millisecond):
			}
			close(g.freed)
			select {
			case err := <-done:
				require.ErrorIs(t, err, c.want)
			case <-time.After(10 * time.Second):
				t.Fatal("the look did not return once its dead-lettering was written")
			}
		})
	}
}

// Close logs the dead-letterings that deliveries left to the housekeeper
// and that it had not logged when it stopped: each line once, in order.
// Here the handler holds the housekeeper in the first line ("a") while a
// second delivery dead-letters "b" and Close starts; once let go, the
// housekeeper may stop before it looks again (its select picks the stop
// or the kick at random), so the test runs the race 20 times.
func TestCloseLogsTheDeadLetteringsLeft(t *testing.T) {
	for i := range 20 {
		dir := t.TempDir()
		clk := newFakeClock()
		q := open(t, dir, &queue.Options{MaxDeliveries: -1, ManualRequeue: true, Clock: clk})
		enqueue(t, q, "pa", queue.WithID("a"))
		enqueue(t, q, "pb", queue.WithID("b"))
		ma, mb := tryDequeue(t, q), tryDequeue(t, q)
		require.NoError(t, ma.Nack(0))
		require.NoError(t, mb.Nack(time.Hour)) // b is due an hour later
		require.NoError(t, q.Close())
		var mu sync.Mutex
		var logged []string
		inA, letA := make(chan struct{}), make(chan struct{})
		h := funcHandler{func(r slog.Record) {
			if r.Message != "queue: message dead-lettered" {
				return
			}
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "id" {
					mu.Lock()
					logged = append(logged, a.Value.String())
					mu.Unlock()
					if a.Value.String() == "a" {
						close(inA)
						<-letA
					}
				}
				return true
			})
		}}
		q = open(t, dir, &queue.Options{MaxDeliveries: 1, ManualRequeue: true, Clock: clk, Logger: slog.New(h)})
		_, err := q.TryDequeue()
		require.ErrorIs(t, err, queue.ErrEmpty, "a is dead-lettered, b not due")
		<-inA // the housekeeper logs a, and waits
		clk.Advance(time.Hour)
		_, err = q.TryDequeue()
		require.ErrorIs(t, err, queue.ErrEmpty, "b is dead-lettered")
		closed := make(chan error, 1)
		go func() { closed <- q.Close() }()
		time.Sleep(5 * time.Millisecond) // Close waits for the housekeeper
		close(letA)
		require.NoError(t, <-closed)
		mu.Lock()
		require.Equal(t, []string{"a", "b"}, logged, "run %d", i)
		mu.Unlock()
	}
}
