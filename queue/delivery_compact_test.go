package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/seed"
	"github.com/walq/walq/queue"
)

// TestDeliveryUnderCompaction: consumers dequeue from a backlog while
// producers write and compactions run without pause (each a snapshot and
// a cut of the log's front, in 16 KiB segments). Every
// message is delivered once, whole (its payload checks its own bytes, so
// one copied from a reader's buffer that was read on or moved fails), and
// a lone consumer sees each producer's messages in the order they were
// enqueued.
func TestDeliveryUnderCompaction(t *testing.T) {
	s := seed.Take(t, "./queue")
	for _, consumers := range []int{1, 3} {
		t.Run(map[int]string{1: "one consumer", 3: "three consumers"}[consumers], func(t *testing.T) {
			deliveryUnderCompaction(t, rand.New(rand.NewPCG(s, uint64(consumers))), consumers)
		})
	}
}

// deliveryUnderCompaction runs TestDeliveryUnderCompaction with the
// given number of consumers.
func deliveryUnderCompaction(t *testing.T, rng *rand.Rand, consumers int) {
	const producers, each = 2, 1500
	q := open(t, t.TempDir(), &queue.Options{SegmentSize: 16 << 10, AckTimeout: time.Hour, Sync: queue.SyncNever})
	defer q.Close()
	payloads := make([][][]byte, producers) // made before the run: rand.Rand is not safe for concurrent use
	for p := range payloads {
		for i := range each {
			payloads[p] = append(payloads[p], stamped(p*each+i, rng))
		}
	}
	var (
		mu        sync.Mutex
		delivered = map[int]int{} // token -> deliveries seen
		last      = [producers]int{-1, -1}
		wg        sync.WaitGroup
		half      sync.WaitGroup        // the first half of each producer's messages enqueued: a backlog before the consumers start
		stop      = make(chan struct{}) // closed when every message is acked
		errs      = make(chan error, producers+consumers+1)
	)
	half.Add(producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, b := range payloads[p] {
				if _, err := q.Enqueue(context.Background(), b); err != nil {
					errs <- err
					return
				}
				if i == each/2 {
					half.Done()
				}
			}
		}()
	}
	half.Wait()
	left := producers * each
	for range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				err := consumeOne(q, stop, func(tok int) error {
					mu.Lock()
					defer mu.Unlock()
					if delivered[tok]++; delivered[tok] > 1 {
						return errors.New("delivered twice")
					}
					if p := tok / each; consumers == 1 && tok <= last[p] {
						return errors.New("out of order")
					}
					last[tok/each] = tok
					left--
					if left == 0 {
						close(stop)
					}
					return nil
				})
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						errs <- err
					}
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := q.Compact(); err != nil {
				errs <- err
				return
			}
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case err := <-errs:
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	require.Len(t, delivered, producers*each)
	requireEmpty(t, q)
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
