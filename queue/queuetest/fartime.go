package queuetest

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// forever is the longest time.Duration: a delay, nack delay, lease or
// window of that length is a common way to say "park it". now plus
// forever is past what an int64 of nanoseconds holds (the year 2262).
const forever = time.Duration(math.MaxInt64)

// never is a far-future deliver-at time, past the year 2262.
var never = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// testFarFuture: a deliver-at, delay, nack delay, lease extension or
// AckTimeout that reaches past the year 2262 means "not for a very long
// time", never "now": the message is not delivered early, and a lease is
// not taken from its holder. A deliver-at before 1678 is simply past.
func testFarFuture(t *testing.T, e Engine) {
	for _, c := range []struct {
		name string
		o    Options
		run  func(t *testing.T, v *env)
	}{
		{"DeliverAtNever", Options{}, func(t *testing.T, v *env) {
			v.enqueue("later", queue.WithDeliverAt(never))
			v.parked(1)
		}},
		{"DelayForever", Options{}, func(t *testing.T, v *env) {
			v.enqueue("later", queue.WithDelay(forever))
			v.parked(1)
		}},
		{"NackForever", Options{}, func(t *testing.T, v *env) {
			v.enqueue("m")
			require.NoError(t, v.next().Nack(forever))
			v.parked(1)
		}},
		{"ExtendForever", Options{}, func(t *testing.T, v *env) {
			v.enqueue("m")
			m := v.next()
			require.NoError(t, m.Extend(forever))
			v.held(m)
		}},
		{"AckTimeoutForever", Options{AckTimeout: forever}, func(t *testing.T, v *env) {
			v.enqueue("m")
			v.held(v.next())
		}},
		{"DeliverAtFarBeyond", Options{}, func(t *testing.T, v *env) {
			// Past what an int64 of microseconds holds, too.
			v.enqueue("300000", queue.WithDeliverAt(time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)))
			v.enqueue("1<<62", queue.WithDeliverAt(time.Unix(1<<62, 0)))
			v.parked(2)
		}},
		{"DeliverAtBefore1678", Options{}, func(t *testing.T, v *env) {
			v.enqueue("past", queue.WithDeliverAt(time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)))
			v.enqueue("now")
			require.Zero(t, v.q.Stats().Delayed)
			require.Equal(t, "past", string(v.next().Payload))
			require.Equal(t, "now", string(v.next().Payload))
		}},
		{"ParkedBehindSoon", Options{}, func(t *testing.T, v *env) {
			v.enqueue("never", queue.WithDeliverAt(never))
			v.enqueue("forever", queue.WithDelay(forever))
			v.enqueue("soon", queue.WithDelay(time.Minute))
			v.clock.Advance(time.Minute)
			m := v.next()
			require.Equal(t, "soon", string(m.Payload), "a far deadline sorts after a near one")
			require.NoError(t, m.Ack())
			v.parked(2)
		}},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, open(t, e, c.o)) })
	}
}

// parked checks that n messages stay delayed a year from now.
func (v *env) parked(n int64) {
	v.t.Helper()
	for range 2 {
		v.empty()
		require.Equal(v.t, n, v.q.Stats().Delayed)
		v.requeueExpired(0)
		v.clock.Advance(365 * 24 * time.Hour)
	}
}

// held checks that m's lease lasts a year from now: no other consumer
// gets its message, and m's receipt still acks it.
func (v *env) held(m *queue.Message) {
	v.t.Helper()
	for range 2 {
		v.clock.Advance(365 * 24 * time.Hour)
		v.requeueExpired(0)
		v.empty()
	}
	require.NoError(v.t, m.Ack())
}

// testSortedFarFuture is testFarFuture for sorted batches: a nack delay,
// lease extension or AckTimeout past the year 2262 holds the key, or
// keeps the lease, for a very long time.
func testSortedFarFuture(t *testing.T, e SortedEngine) {
	for _, c := range []struct {
		name string
		o    SortedOptions
		run  func(t *testing.T, v *senv, b *queue.Batch[int64])
	}{
		{"NackForever", SortedOptions{}, func(t *testing.T, v *senv, b *queue.Batch[int64]) {
			require.NoError(t, b.Nack(forever))
			v.later()
		}},
		{"ExtendForever", SortedOptions{}, func(t *testing.T, v *senv, b *queue.Batch[int64]) {
			require.NoError(t, b.Extend(forever))
			v.later()
			require.NoError(t, b.Ack())
		}},
		{"AckTimeoutForever", SortedOptions{Options: Options{AckTimeout: forever}}, func(t *testing.T, v *senv, b *queue.Batch[int64]) {
			v.later()
			require.NoError(t, b.Ack())
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := openSorted(t, e, c.o)
			v.publish(1, "a")
			c.run(t, v, v.pull(10)[0])
		})
	}
}

// later checks that no key becomes pullable, and no lease runs out, in
// the next two years; then that a new key is pulled alone.
func (v *senv) later() {
	v.t.Helper()
	for range 2 {
		v.clock.Advance(365 * 24 * time.Hour)
		n, err := v.q.RequeueExpired()
		require.NoError(v.t, err)
		require.Zero(v.t, n, "leases ended by RequeueExpired")
		v.empty()
	}
	v.publish(2, "b")
	bs := v.pull(10)
	require.Len(v.t, bs, 1)
	require.Equal(v.t, "b", bs[0].Key)
	require.NoError(v.t, bs[0].Ack())
}

// testWindowedForever: a windowed queue whose window is forever closes
// none within years: a window's end past the year 2262 does not wrap
// into the past.
func testWindowedForever(t *testing.T, e SortedEngine) {
	o := SortedOptions{Options: Options{AckTimeout: forever, MaxDeliveries: -1}, Window: forever}
	o.Clock = NewClock()
	q := e.OpenWindowed(t, o)
	t.Cleanup(func() { _ = q.Close() })
	require.NoError(t, q.Publish(context.Background(), "a", []byte("1")))
	for range 2 {
		o.Clock.Advance(365 * 24 * time.Hour)
		_, err := q.TryPull(10)
		require.ErrorIs(t, err, queue.ErrEmpty, "a window of forever closed")
	}
}
