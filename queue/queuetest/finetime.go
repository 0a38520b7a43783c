package queuetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// offGrid is how far each fine-time subtest moves the clock first, so
// that it reads between two whole microseconds: an engine that counts
// time more coarsely than the nanoseconds of a time.Duration must round
// what ends there up, never down.
const offGrid = 300 * time.Nanosecond

// testFineTimes: a delay, nack delay, lease extension or AckTimeout that
// is not a whole number of microseconds ends no earlier than it says,
// whatever the engine's resolution: a message is not delivered before
// its delay has passed, and a receipt is not lost before its lease ends.
// An engine may end them later by less than a microsecond; each check
// past the end leaves it that much. A delay of 0 or less, or a
// deliver-at not after now, delays nothing: such messages come in
// enqueue order among the others never delivered.
func testFineTimes(t *testing.T, e Engine) {
	for _, c := range []struct {
		name string
		o    Options
		run  func(t *testing.T, v *env)
	}{
		{"Delay", Options{}, func(t *testing.T, v *env) {
			v.enqueue("later", queue.WithDelay(500*time.Nanosecond))
			v.empty()
			v.clock.Advance(499 * time.Nanosecond)
			v.empty()
			v.clock.Advance(time.Microsecond + time.Nanosecond)
			require.Equal(t, "later", string(v.next().Payload))
		}},
		{"DeliverAt", Options{}, func(t *testing.T, v *env) {
			v.enqueue("later", queue.WithDeliverAt(v.clock.Now().Add(1500*time.Nanosecond)))
			v.clock.Advance(1499 * time.Nanosecond)
			v.empty()
			v.clock.Advance(time.Microsecond + time.Nanosecond)
			require.Equal(t, "later", string(v.next().Payload))
		}},
		{"NoDelay", Options{}, func(t *testing.T, v *env) {
			v.enqueue("plain")
			v.enqueue("zero", queue.WithDelay(0))
			v.enqueue("negative", queue.WithDelay(-time.Second))
			v.enqueue("now", queue.WithDeliverAt(v.clock.Now()))
			v.enqueue("past", queue.WithDeliverAt(v.clock.Now().Add(-time.Nanosecond)))
			for _, want := range []string{"plain", "zero", "negative", "now", "past"} {
				require.Equal(t, want, string(v.next().Payload), "no delay: enqueue order")
			}
		}},
		{"NackDelay", Options{}, func(t *testing.T, v *env) {
			v.enqueue("m")
			require.NoError(t, v.next().Nack(500*time.Nanosecond))
			v.empty()
			v.clock.Advance(499 * time.Nanosecond)
			v.empty()
			v.clock.Advance(time.Microsecond + time.Nanosecond)
			require.Equal(t, 2, v.next().Deliveries)
		}},
		{"ExtendNanosecond", Options{}, func(t *testing.T, v *env) {
			v.enqueue("m")
			m := v.next()
			require.NoError(t, m.Extend(time.Nanosecond))
			require.NoError(t, m.Ack(), "a lease extended by 1ns, acked at the same instant")
		}},
		{"Extend", Options{}, func(t *testing.T, v *env) {
			v.enqueue("m")
			m := v.next()
			require.NoError(t, m.Extend(1500*time.Nanosecond))
			v.clock.Advance(1499 * time.Nanosecond)
			v.requeueExpired(0)
			require.NoError(t, m.Extend(1500*time.Nanosecond), "1ns before the extension ends")
			v.clock.Advance(1500*time.Nanosecond + time.Microsecond)
			v.requeueExpired(1)
			require.ErrorIs(t, m.Ack(), queue.ErrLeaseLost)
		}},
		{"AckTimeout", Options{AckTimeout: 10*time.Second + 500*time.Nanosecond}, func(t *testing.T, v *env) {
			v.enqueue("m")
			m := v.next()
			v.clock.Advance(10*time.Second + 499*time.Nanosecond)
			v.requeueExpired(0)
			v.empty()
			require.NoError(t, m.Ack(), "1ns before the lease ends")
			v.enqueue("n")
			m = v.next()
			v.clock.Advance(10*time.Second + 500*time.Nanosecond + time.Microsecond)
			v.requeueExpired(1)
			require.ErrorIs(t, m.Ack(), queue.ErrLeaseLost)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := open(t, e, c.o)
			v.clock.Advance(offGrid)
			c.run(t, v)
		})
	}
}

// testSortedFineTimes is testFineTimes for sorted batches: a nack delay,
// lease extension or AckTimeout that is not a whole number of
// microseconds holds the key, or keeps the lease, no shorter than it
// says.
func testSortedFineTimes(t *testing.T, e SortedEngine) {
	for _, c := range []struct {
		name string
		o    SortedOptions
		run  func(t *testing.T, v *senv, b *queue.Batch[int64])
	}{
		{"NackDelay", SortedOptions{}, func(t *testing.T, v *senv, b *queue.Batch[int64]) {
			require.NoError(t, b.Nack(500*time.Nanosecond))
			v.empty()
			v.clock.Advance(499 * time.Nanosecond)
			v.empty()
			v.clock.Advance(time.Microsecond + time.Nanosecond)
			require.Equal(t, 2, v.pull(10)[0].Values[0].Deliveries)
		}},
		{"ExtendNanosecond", SortedOptions{}, func(t *testing.T, v *senv, b *queue.Batch[int64]) {
			require.NoError(t, b.Extend(time.Nanosecond))
			require.NoError(t, b.Ack(), "a lease extended by 1ns, acked at the same instant")
		}},
		{"Extend", SortedOptions{}, func(t *testing.T, v *senv, b *queue.Batch[int64]) {
			require.NoError(t, b.Extend(1500*time.Nanosecond))
			v.clock.Advance(1499 * time.Nanosecond)
			v.expired(0)
			require.NoError(t, b.Extend(1500*time.Nanosecond), "1ns before the extension ends")
			v.clock.Advance(1500*time.Nanosecond + time.Microsecond)
			v.expired(1)
			require.ErrorIs(t, b.Ack(), queue.ErrLeaseLost)
		}},
		{"AckTimeout", SortedOptions{Options: Options{AckTimeout: 10*time.Second + 500*time.Nanosecond}},
			func(t *testing.T, v *senv, b *queue.Batch[int64]) {
				v.clock.Advance(10*time.Second + 499*time.Nanosecond)
				v.expired(0)
				require.NoError(t, b.Ack(), "1ns before the lease ends")
				v.publish(2, "b")
				b = v.pull(10)[0]
				v.clock.Advance(10*time.Second + 500*time.Nanosecond + time.Microsecond)
				v.expired(1)
				require.ErrorIs(t, b.Ack(), queue.ErrLeaseLost)
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := openSorted(t, e, c.o)
			v.clock.Advance(offGrid)
			v.publish(1, "a")
			c.run(t, v, v.pull(10)[0])
		})
	}
}

// expired checks that RequeueExpired ends want leases.
func (v *senv) expired(want int) {
	v.t.Helper()
	n, err := v.q.RequeueExpired()
	require.NoError(v.t, err)
	require.Equal(v.t, want, n, "leases ended by RequeueExpired")
}
