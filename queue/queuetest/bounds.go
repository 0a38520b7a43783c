package queuetest

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// optionBounds are the AckTimeout and MaxMessageSize on either side of
// the bounds every engine applies: any positive lease, however short,
// and a MaxMessageSize up to queue.MaxMessageSizeLimit.
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

// TestOptionBounds checks that open, which opens a queue of the engine
// with the given AckTimeout and MaxMessageSize (zero: the default),
// accepts the options inside the bounds every engine applies and refuses
// those outside with queue.ErrInvalidOptions, so that a program moves
// between engines without its options changing meaning.
func TestOptionBounds(t *testing.T, open func(t *testing.T, ackTimeout time.Duration, maxMessageSize int) (io.Closer, error)) {
	for _, c := range optionBounds {
		t.Run(c.name, func(t *testing.T) {
			q, err := open(t, c.ackTimeout, c.maxMessageSize)
			if !c.ok {
				require.ErrorIs(t, err, queue.ErrInvalidOptions)
				return
			}
			require.NoError(t, err)
			require.NoError(t, q.Close())
		})
	}
}
