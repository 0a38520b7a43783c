package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestOptionBounds: the AckTimeout and MaxMessageSize on either side of
// the bounds both engines apply, the table of the embedded queue's
// options_bounds_test.go. The Redis engine took a MaxMessageSize over
// 1 GiB, which the embedded queue refused, and refused a lease of 1ns,
// which the embedded queue took.
func TestOptionBounds(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	cases := []struct {
		name           string
		ackTimeout     time.Duration
		maxMessageSize int
		ok             bool
	}{
		{"ack timeout 1ns", time.Nanosecond, 0, true},
		{"ack timeout just under 1ms", time.Millisecond - 1, 0, true},
		{"ack timeout 1ms", time.Millisecond, 0, true},
		{"ack timeout negative", -time.Second, 0, false},
		{"max message size 1GiB", 0, 1 << 30, true},
		{"max message size over 1GiB", 0, 1<<30 + 1, false},
		{"max message size negative", 0, -1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, err := redisq.Open(ctx, srv.Client(), "bounds", &redisq.Options{AckTimeout: c.ackTimeout, MaxMessageSize: c.maxMessageSize})
			if !c.ok {
				require.ErrorIs(t, err, queue.ErrInvalidOptions)
				return
			}
			require.NoError(t, err)
			require.NoError(t, q.Close())
		})
	}
}

// TestSubMillisecondLease: a lease under a millisecond, which Open
// refused, is kept to its deadline rounded up to a whole microsecond,
// then ends, and the message is delivered again.
func TestSubMillisecondLease(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	cases := []struct {
		name       string
		ackTimeout time.Duration
		held       time.Duration // still leased this long after the delivery
	}{
		{"1ns, a microsecond rounded up", time.Nanosecond, 0},
		{"500µs", 500 * time.Microsecond, 499 * time.Microsecond},
		{"just under 1ms", time.Millisecond - time.Nanosecond, 999 * time.Microsecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := queuetest.NewClock()
			q, err := redisq.Open(ctx, srv.Client(), "lease "+c.name,
				&redisq.Options{AckTimeout: c.ackTimeout, Clock: clock, ManualRequeue: true})
			require.NoError(t, err)
			t.Cleanup(func() { _ = q.Close() })
			_, err = q.Enqueue(ctx, []byte("latte"))
			require.NoError(t, err)
			m, err := q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, 1, m.Deliveries)

			clock.Advance(c.held)
			n, err := q.RequeueExpired()
			require.NoError(t, err)
			require.Zero(t, n, "the lease still runs %v after the delivery", c.held)
			_, err = q.TryDequeue()
			require.ErrorIs(t, err, queue.ErrEmpty, "the message is still leased")

			clock.Advance(time.Millisecond)
			n, err = q.RequeueExpired()
			require.NoError(t, err)
			require.Equal(t, 1, n, "the lease has ended")
			again, err := q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, m.ID, again.ID)
			require.Equal(t, 2, again.Deliveries)
			require.ErrorIs(t, m.Ack(), queue.ErrLeaseLost, "the first delivery's lease is over")
			require.NoError(t, again.Ack())
		})
	}
}
