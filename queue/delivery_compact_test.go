package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/seed"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestDeliveryUnderCompaction: consumers dequeue from a backlog while
// producers write and compactions run without pause, and a message leased
// for the whole run holds the log's front, so that the acked messages
// behind it put the log over its bound and each compaction copies the
// never-delivered backlog forward under the consumers. Every message is
// delivered once, whole (its payload checks its own bytes, so one copied
// from a reader's buffer that was read on or moved, or a copy made with
// another message's payload, fails), and a lone consumer sees each
// producer's messages in the order they were enqueued. The test fails if
// no compaction copied a never-delivered message.
func TestDeliveryUnderCompaction(t *testing.T) {
	s := seed.Take(t, "./queue")
	for _, consumers := range []int{1, 3} {
		t.Run(map[int]string{1: "one consumer", 3: "three consumers"}[consumers], func(t *testing.T) {
			deliveryUnderCompaction(t, rand.New(rand.NewPCG(s, uint64(consumers))), consumers)
		})
	}
}

// deliveryRun is the shared state of one run of TestDeliveryUnderCompaction.
type deliveryRun struct {
	q         *queue.Queue
	consumers int
	each      int // messages per producer; a token's producer is tok / each

	mu        sync.Mutex // guards delivered, last and left
	delivered map[int]int
	last      []int // per producer, the last token a lone consumer saw
	left      int   // messages not acked yet

	copied   atomic.Uint64 // never-delivered messages that compactions copied forward
	stop     chan struct{} // closed when every message is acked, or on the first error
	stopOnce sync.Once
	errs     chan error // the first error of each goroutine
}

// deliveryUnderCompaction runs TestDeliveryUnderCompaction with the
// given number of consumers.
func deliveryUnderCompaction(t *testing.T, rng *rand.Rand, consumers int) {
	const producers, each = 2, 1000
	o := queue.Options{SegmentSize: 4096, AckTimeout: time.Hour, Sync: queue.SyncNever}
	testhook.SetManualCompaction(&o) // the test's own passes are all: it counts what each copies
	q := open(t, t.TempDir(), &o)
	defer q.Close()
	// The anchor stays leased, so its record holds the log's front until a
	// compaction copies it, and with it the backlog, forward.
	enqueue(t, q, "anchor")
	anchor := tryDequeue(t, q)
	r := &deliveryRun{q: q, consumers: consumers, each: each, delivered: map[int]int{},
		last: []int{-1, -1}, left: producers * each, stop: make(chan struct{}),
		errs: make(chan error, producers+consumers+1)}
	payloads := make([][][]byte, producers) // made before the run: rand.Rand is not safe for concurrent use
	for p := range payloads {
		for i := range each {
			payloads[p] = append(payloads[p], stamped(p*each+i, rng))
		}
	}
	var wg sync.WaitGroup
	var half sync.WaitGroup // the first half of each producer's messages enqueued: a backlog before the consumers start
	half.Add(producers)
	for p := range producers {
		wg.Add(1)
		go func() { defer wg.Done(); r.produce(payloads[p], half.Done) }()
	}
	half.Wait()
	for range consumers {
		wg.Add(1)
		go func() { defer wg.Done(); r.consume() }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); r.compact() }()
	wg.Wait()
	close(r.errs)
	for err := range r.errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	require.Len(t, r.delivered, producers*each)
	t.Logf("compactions copied %d never-delivered messages forward (%d messages in all)", r.copied.Load(), q.Stats().Moved)
	require.Positive(t, r.copied.Load(), "no compaction copied a never-delivered message forward")
	require.NoError(t, anchor.Ack())
	requireEmpty(t, q)
}

// fail records err and stops the run.
func (r *deliveryRun) fail(err error) {
	r.errs <- err
	r.stopOnce.Do(func() { close(r.stop) })
}

// produce enqueues payloads in order, calling half once half of them are
// enqueued (or the producer failed before).
func (r *deliveryRun) produce(payloads [][]byte, half func()) {
	var once sync.Once
	defer once.Do(half)
	for i, b := range payloads {
		if _, err := r.q.Enqueue(context.Background(), b); err != nil {
			r.fail(err)
			return
		}
		if i == len(payloads)/2 {
			once.Do(half)
		}
	}
}

// consume dequeues, checks and acks messages until the run stops.
func (r *deliveryRun) consume() {
	for {
		err := consumeOne(r.q, r.stop, r.check)
		if errors.Is(err, context.Canceled) {
			return
		}
		if err != nil {
			r.fail(err)
			return
		}
	}
}

// check notes the delivery of tok: it fails if tok was delivered before,
// or, with a lone consumer, if tok comes before a token of its producer
// already seen. The last one stops the run.
func (r *deliveryRun) check(tok int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.delivered[tok]++; r.delivered[tok] > 1 {
		return errors.New("delivered twice")
	}
	p := tok / r.each
	if r.consumers == 1 && tok <= r.last[p] {
		return fmt.Errorf("out of order: after token %d", r.last[p])
	}
	r.last[p] = tok
	if r.left--; r.left == 0 {
		r.stopOnce.Do(func() { close(r.stop) })
	}
	return nil
}

// compact compacts without pause until the run stops, and counts the
// never-delivered messages each pass copied forward: a pass copies at most
// one message that is not one (the anchor, or a consumer's leased one) per
// leased message, so what it copies beyond 1 + consumers is.
func (r *deliveryRun) compact() {
	for {
		select {
		case <-r.stop:
			return
		default:
		}
		before := r.q.Stats().Moved
		if err := r.q.Compact(); err != nil {
			r.fail(err)
			return
		}
		if n, leased := r.q.Stats().Moved-before, uint64(1+r.consumers); n > leased {
			r.copied.Add(n - leased)
		}
	}
}

// consumeOne dequeues a message, checks its payload and its token with
// check, and acks it. It returns context.Canceled once stop is closed.
func consumeOne(q *queue.Queue, stop <-chan struct{}, check func(tok int) error) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	m, err := q.Dequeue(ctx)
	if err != nil {
		return err
	}
	tok, err := unstamp(m.Payload)
	if err != nil {
		return err
	}
	if cap(m.Payload) != len(m.Payload) {
		return errors.New("a payload with room to append over another's bytes")
	}
	if m.Deliveries != 1 {
		return errors.New("a message delivered again though none was given back")
	}
	if err := check(tok); err != nil {
		return fmt.Errorf("message %s, token %d: %w", m.ID, tok, err)
	}
	return m.Ack()
}
