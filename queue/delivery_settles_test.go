package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/walq/walq/internal/seed"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestDeliveryBesideSettlesAndCompactions: consumers Dequeue, TryDequeue
// and DequeueBatch, then ack, nack, or dead-letter and purge what they get,
// while producers write, compactions copy the never-delivered backlog
// forward (a message leased for the whole run holds the log's front) and
// finally Close ends the run under them. No message is delivered twice at
// once, none after it was acked or purged, none again unless it was given
// back; every payload is whole; and after Close every call says
// ErrClosed. A delivery that reads at the cursor ahead of the queue's lock
// (tried in 0cef80a) must keep all of it. 3,000 messages, 900 under the
// race detector (test.sh runs the full size without it).
func TestDeliveryBesideSettlesAndCompactions(t *testing.T) {
	s := seed.Take(t, "./queue")
	rng := rand.New(rand.NewPCG(s, 61))
	o := queue.Options{SegmentSize: 4096, AckTimeout: time.Hour, Sync: queue.SyncNever}
	testhook.SetManualCompaction(&o)
	q := open(t, t.TempDir(), &o)
	enqueue(t, q, "anchor")
	anchor := tryDequeue(t, q)
	const producers, consumers = 2, 3
	each := 1500
	if raceEnabled {
		each = 450
	}
	payloads := make([][][]byte, producers) // made before the run: rand.Rand is not safe for concurrent use
	for p := range payloads {
		for i := range each {
			payloads[p] = append(payloads[p], stamped(p*each+i, rng))
		}
	}
	l := &deliveryLedger{state: map[int]string{}, left: producers * each, stop: make(chan struct{})}
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, b := range payloads[p] {
				if _, err := q.Enqueue(context.Background(), b); err != nil {
					l.fail(err)
					return
				}
			}
		}()
	}
	for c := range consumers {
		wg.Add(1)
		go func() { defer wg.Done(); l.consume(q, c, rand.New(rand.NewPCG(s, uint64(c)))) }()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !l.stopped() {
			if err := q.Compact(); err != nil {
				l.fail(err)
				return
			}
		}
	}()
	select {
	case <-l.stop: // all settled, or a failure
	case <-time.After(2 * time.Minute): // a bound on a lost message, not a wait for one: runs take seconds
		l.fail(fmt.Errorf("%d messages never settled", l.unsettled()))
	}
	wg.Wait()
	if err := l.first(); err != nil {
		t.Fatal(err)
	}
	if err := anchor.Ack(); err != nil {
		t.Fatal(err)
	}
	// Close under consumers, the queue empty: each returns ErrClosed.
	var closing sync.WaitGroup
	for range consumers {
		closing.Add(1)
		go func() {
			defer closing.Done()
			m, err := q.Dequeue(context.Background())
			if m != nil || !errors.Is(err, queue.ErrClosed) {
				l.fail(fmt.Errorf("Dequeue across Close: %v, %v", m, err))
			}
		}()
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	closing.Wait()
	if _, err := q.TryDequeue(); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("TryDequeue after Close: %v", err)
	}
	moved := q.Stats().Moved
	if moved == 0 {
		t.Fatal("no compaction copied a message forward: the cursor was never overtaken")
	}
	t.Logf("moved %d", moved)
}

// deliveryLedger is what the consumers of TestDeliveryBesideSettlesAndCompactions saw.
type deliveryLedger struct {
	mu    sync.Mutex
	state map[int]string // token -> "leased", "ready" (given back), "done" (acked or purged)
	left  int            // tokens not done
	errs  []error
	stop  chan struct{} // closed when left reaches 0, or on the first failure
	once  sync.Once
}

// fail records err and stops the run.
func (l *deliveryLedger) fail(err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
	l.once.Do(func() { close(l.stop) })
}

// first returns the first failure, or nil.
func (l *deliveryLedger) first() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) == 0 {
		return nil
	}
	return l.errs[0]
}

// unsettled returns how many tokens are not done yet.
func (l *deliveryLedger) unsettled() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.left
}

// stopped reports whether the run stopped.
func (l *deliveryLedger) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// leased notes the delivery of tok and fails if tok is leased already or
// done.
func (l *deliveryLedger) leased(tok int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.state[tok]; s == "leased" || s == "done" {
		return fmt.Errorf("token %d delivered while %s", tok, s)
	}
	l.state[tok] = "leased"
	return nil
}

// settled notes that tok is given back (done false) or acked or purged.
func (l *deliveryLedger) settled(tok int, done bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !done {
		l.state[tok] = "ready"
		return
	}
	l.state[tok] = "done"
	if l.left--; l.left == 0 {
		l.once.Do(func() { close(l.stop) })
	}
}

// consume takes messages in one of three ways and settles each until the
// run stops.
func (l *deliveryLedger) consume(q *queue.Queue, c int, rng *rand.Rand) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-l.stop; cancel() }()
	for !l.stopped() {
		var ms queue.Messages
		var err error
		switch c {
		case 0:
			var m *queue.Message
			if m, err = q.Dequeue(ctx); m != nil {
				ms = queue.Messages{m}
			}
		case 1: // TryDequeue, and on ErrEmpty a Dequeue that waits rather than spins
			var m *queue.Message
			if m, err = q.TryDequeue(); errors.Is(err, queue.ErrEmpty) {
				m, err = q.Dequeue(ctx)
			}
			if m != nil {
				ms = queue.Messages{m}
			}
		default:
			ms, err = q.DequeueBatch(ctx, 3)
		}
		if errors.Is(err, context.Canceled) {
			return
		}
		if err == nil {
			err = l.settleAll(q, ms, rng)
		}
		if err != nil {
			l.fail(err)
			return
		}
	}
}

// settleAll checks each message and acks it, gives it back, or
// dead-letters and purges it.
func (l *deliveryLedger) settleAll(q *queue.Queue, ms queue.Messages, rng *rand.Rand) error {
	for _, m := range ms {
		tok, err := unstamp(m.Payload)
		if err == nil {
			err = l.leased(tok)
		}
		if err != nil {
			return fmt.Errorf("message %s: %w", m.ID, err)
		}
		switch n := rng.IntN(10); {
		case n == 0 && m.Deliveries < 3:
			l.settled(tok, false) // before the nack: a consumer may have it at once
			err = m.Nack(0)
		case n == 1:
			if err = m.DeadLetter("test"); err == nil {
				err = q.PurgeDead(m.ID)
			}
			l.settled(tok, true)
		default:
			err = m.Ack()
			l.settled(tok, true)
		}
		if err != nil {
			return fmt.Errorf("message %s: %w", m.ID, err)
		}
	}
	return nil
}
