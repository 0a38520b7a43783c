package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
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
		{"ack timeout 1ns", time.Nanosecond, 0, false},
		{"ack timeout just under 1ms", time.Millisecond - 1, 0, false},
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
