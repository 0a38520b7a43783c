package queue_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// optionBounds are the AckTimeout and MaxMessageSize on either side of
// the bounds both engines apply; redisq's options_bounds_test.go holds
// the same table. The embedded queue took a lease of 1ns, which the Redis
// engine refused, and the Redis engine took a MaxMessageSize over 1 GiB,
// which this one refused.
var optionBounds = []struct {
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

func TestOptionBounds(t *testing.T) {
	for _, c := range optionBounds {
		t.Run(c.name, func(t *testing.T) {
			q, err := queue.Open(t.TempDir(), &queue.Options{AckTimeout: c.ackTimeout, MaxMessageSize: c.maxMessageSize})
			if !c.ok {
				require.ErrorIs(t, err, queue.ErrInvalidOptions)
				return
			}
			require.NoError(t, err)
			require.NoError(t, q.Close())
		})
	}
}
