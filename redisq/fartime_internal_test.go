package redisq

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

const (
	forever = time.Duration(math.MaxInt64)
	year    = 365 * 24 * time.Hour
)

// farTimes are deliver-at times that mean "never": past 2262 (where the
// embedded queue's nanoseconds end), and past what an int64 of
// microseconds holds (year 292,277).
var farTimes = []time.Time{
	time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC),
	time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC),
	time.Unix(1<<62, 0),
}

// TestFarFutureTimesFarClock: with the clock in the year 2300, where a
// time in µs no longer fits a double exactly, a far deliver-at, a delay,
// nack delay, extension or AckTimeout of forever parks the message or
// keeps its lease for years, and the housekeeper's next wake-up is far
// off too (not now, which would make it spin).
func TestFarFutureTimesFarClock(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		ackTO  time.Duration
		run    func(t *testing.T, q *Queue) *queue.Message // the held message, if any
		parked int64
	}{
		{"deliver-at", 0, func(t *testing.T, q *Queue) *queue.Message {
			for _, at := range farTimes {
				_, err := q.Enqueue(ctx, []byte("never"), queue.WithDeliverAt(at))
				require.NoError(t, err)
			}
			return nil
		}, int64(len(farTimes))},
		{"delay", 0, func(t *testing.T, q *Queue) *queue.Message {
			_, err := q.Enqueue(ctx, []byte("later"), queue.WithDelay(forever))
			require.NoError(t, err)
			return nil
		}, 1},
		{"nack", 0, func(t *testing.T, q *Queue) *queue.Message {
			require.NoError(t, farDequeue(t, q).Nack(forever))
			return nil
		}, 1},
		{"extend", 0, func(t *testing.T, q *Queue) *queue.Message {
			m := farDequeue(t, q)
			require.NoError(t, m.Extend(forever))
			return m
		}, 0},
		{"ack-timeout", forever, func(t *testing.T, q *Queue) *queue.Message {
			return farDequeue(t, q)
		}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := &farClock{t: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}
			q, err := Open(ctx, srv.Client(), "far-"+c.name, &Options{Clock: clock, AckTimeout: c.ackTO, ManualRequeue: true})
			require.NoError(t, err)
			defer q.Close()
			held := c.run(t, q)
			for range 2 {
				clock.add(year)
				n, wait, err := q.sweep(true)
				require.NoError(t, err)
				require.Zero(t, n, "a lease ran out")
				require.Greater(t, wait, year, "the next deadline")
				_, err = q.TryDequeue()
				require.ErrorIs(t, err, queue.ErrEmpty)
				require.Equal(t, c.parked, q.Stats().Delayed)
			}
			if held != nil {
				require.NoError(t, held.Ack())
			}
		})
	}
}

// farDequeue enqueues a message and dequeues it.
func farDequeue(t *testing.T, q *Queue) *queue.Message {
	t.Helper()
	_, err := q.Enqueue(context.Background(), []byte("m"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	return m
}

// TestSortedFarFutureFarClock is TestFarFutureTimesFarClock for a sorted
// batch's nack delay, extension and AckTimeout.
func TestSortedFarFutureFarClock(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		ackTO time.Duration
		run   func(t *testing.T, b *queue.Batch[int64]) (held bool)
	}{
		{"nack", 0, func(t *testing.T, b *queue.Batch[int64]) bool {
			require.NoError(t, b.Nack(forever))
			return false
		}},
		{"extend", 0, func(t *testing.T, b *queue.Batch[int64]) bool {
			require.NoError(t, b.Extend(forever))
			return true
		}},
		{"ack-timeout", forever, func(*testing.T, *queue.Batch[int64]) bool { return true }},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := &farClock{t: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}
			s, err := OpenSorted[int64](ctx, srv.Client(), "far-sorted-"+c.name,
				&SortedOptions{Options: Options{Clock: clock, AckTimeout: c.ackTO, ManualRequeue: true}})
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, s.Publish(ctx, 1, "a", []byte("v")))
			bs, err := s.TryPull(10)
			require.NoError(t, err)
			held := c.run(t, bs[0])
			for range 2 {
				clock.add(year)
				n, err := s.RequeueExpired()
				require.NoError(t, err)
				require.Zero(t, n, "a lease ran out")
				_, err = s.TryPull(10)
				require.ErrorIs(t, err, queue.ErrEmpty)
			}
			if held {
				require.NoError(t, bs[0].Ack())
			}
		})
	}
}

// TestSortedTimeKeyRange: a time.Time sort key is kept as nanoseconds
// since 1970 in an int64 (the years 1678 to 2262). A time outside them
// (the zero time, a far-future "never") is refused by Publish, not
// wrapped into another time that is pulled ahead of every other value
// and delivered as the value's sort key; the first and last
// representable nanoseconds round-trip in order.
func TestSortedTimeKeyRange(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := OpenSorted[time.Time](ctx, srv.Client(), "time-key-range", nil)
	require.NoError(t, err)
	defer s.Close()
	for _, bad := range []time.Time{{}, time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)} {
		err := s.Publish(ctx, bad, "k", []byte("out of range"))
		require.ErrorIs(t, err, queue.ErrInvalidOptions, "Publish at %v", bad)
	}
	edges := []time.Time{time.Unix(0, math.MinInt64), time.Unix(1_800_000_000, 0), time.Unix(0, math.MaxInt64)}
	for i, at := range edges {
		require.NoError(t, s.Publish(ctx, at, "k", []byte{byte(i)}))
	}
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.Len(t, bs[0].Values, len(edges))
	for i, v := range bs[0].Values {
		require.True(t, v.Sort.Equal(edges[i]), "value %d: sort key %v, published %v", i, v.Sort, edges[i])
		require.Equal(t, []byte{byte(i)}, v.Payload)
	}
}

// TestFarDeliverAtClamp: a deliver-at past farMicros is clamped to it,
// and that value survives the trip to a score and back: the message
// comes due after every deadline a clock plus a Duration can give (here
// a delay of forever from the year 2300), still parked a second before
// farMicros, ready at it. (Times that large are kept to 128 µs in a
// double, the clock's too.)
func TestFarDeliverAtClamp(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	clock := &farClock{t: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}
	q, err := Open(ctx, srv.Client(), "far-clamp", &Options{Clock: clock, AckTimeout: time.Hour, ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("never"), queue.WithDeliverAt(time.Unix(1<<62, 0)))
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("forever"), queue.WithDelay(forever))
	require.NoError(t, err)
	clock.add(forever)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "forever", string(m.Payload))
	require.NoError(t, m.Ack())
	for _, c := range []struct {
		at    int64
		ready bool
	}{{farMicros - 1e6, false}, {farMicros, true}} {
		clock.mu.Lock()
		clock.t = time.UnixMicro(c.at)
		clock.mu.Unlock()
		m, err := q.TryDequeue()
		if !c.ready {
			require.ErrorIs(t, err, queue.ErrEmpty, "at %d µs", c.at)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, "never", string(m.Payload))
		require.NoError(t, m.Ack())
	}
}
