package redisq_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestOptionBounds: the Redis engine applies the option bounds every
// engine applies (queuetest.TestOptionBounds). It took a MaxMessageSize
// over 1 GiB, which the embedded queue refused, and refused a lease of
// 1ns, which the embedded queue took.
func TestOptionBounds(t *testing.T) {
	srv := redistest.Start(t)
	queuetest.TestOptionBounds(t, func(t *testing.T, ackTimeout time.Duration, maxMessageSize int) (io.Closer, error) {
		return redisq.Open(context.Background(), srv.Client(), "bounds",
			&redisq.Options{AckTimeout: ackTimeout, MaxMessageSize: maxMessageSize})
	})
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
