package queue_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestFarFutureTimes: a deliver-at, delay, nack delay or lease extension
// that reaches past what an int64 of nanoseconds holds (year 2262) means
// "not for a very long time", never "now": the message is not delivered
// early, nor handed to a second consumer while its lease was just
// extended.
func TestFarFutureTimes(t *testing.T) {
	forever := time.Duration(math.MaxInt64)
	never := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		run  func(t *testing.T, q *queue.Queue, clock interface{ Advance(time.Duration) })
	}{
		{"deliver-at", func(t *testing.T, q *queue.Queue, _ interface{ Advance(time.Duration) }) {
			enqueue(t, q, "later", queue.WithDeliverAt(never))
		}},
		{"delay", func(t *testing.T, q *queue.Queue, _ interface{ Advance(time.Duration) }) {
			enqueue(t, q, "later", queue.WithDelay(forever))
		}},
		{"nack", func(t *testing.T, q *queue.Queue, _ interface{ Advance(time.Duration) }) {
			enqueue(t, q, "m")
			require.NoError(t, tryDequeue(t, q).Nack(forever))
		}},
		{"extend", func(t *testing.T, q *queue.Queue, clock interface{ Advance(time.Duration) }) {
			enqueue(t, q, "m")
			require.NoError(t, tryDequeue(t, q).Extend(forever))
			clock.Advance(time.Hour)
			n, err := q.RequeueExpired()
			require.NoError(t, err)
			require.Zero(t, n, "a lease just extended ran out")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := newFakeClock()
			dir := t.TempDir()
			q := open(t, dir, &queue.Options{Clock: clock, ManualRequeue: true})
			c.run(t, q, clock)
			clock.Advance(time.Minute)
			requireEmpty(t, q)
			require.NoError(t, q.Close())
			q = open(t, dir, &queue.Options{Clock: clock, ManualRequeue: true})
			defer q.Close()
			n, err := q.RequeueExpired()
			require.NoError(t, err)
			require.Zero(t, n)
			requireEmpty(t, q)
		})
	}
}

// TestSortedFarFutureTimes is TestFarFutureTimes for a sorted batch's nack
// delay and lease extension.
func TestSortedFarFutureTimes(t *testing.T) {
	forever := time.Duration(math.MaxInt64)
	for _, op := range []string{"nack", "extend"} {
		t.Run(op, func(t *testing.T) {
			clock := newFakeClock()
			sq, err := queue.OpenSorted[int](t.TempDir(), &queue.SortedOptions{
				Options: queue.Options{Clock: clock, ManualRequeue: true}})
			require.NoError(t, err)
			defer sq.Close()
			require.NoError(t, sq.Publish(context.Background(), 1, "k", []byte("v")))
			bs, err := sq.TryPull(10)
			require.NoError(t, err)
			if op == "nack" {
				require.NoError(t, bs[0].Nack(forever))
			} else {
				require.NoError(t, bs[0].Extend(forever))
			}
			clock.Advance(time.Hour)
			n, err := sq.RequeueExpired()
			require.NoError(t, err)
			require.Zero(t, n)
			_, err = sq.TryPull(10)
			require.ErrorIs(t, err, queue.ErrEmpty)
		})
	}
}
