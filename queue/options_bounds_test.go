package queue_test

import (
	"io"
	"testing"
	"time"

	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
)

// TestOptionBounds: the embedded queue applies the option bounds every
// engine applies (queuetest.TestOptionBounds). It took a lease of 1ns,
// which the Redis engine refused, and the Redis engine took a
// MaxMessageSize over 1 GiB, which this one refused.
func TestOptionBounds(t *testing.T) {
	queuetest.TestOptionBounds(t, func(t *testing.T, ackTimeout time.Duration, maxMessageSize int) (io.Closer, error) {
		return queue.Open(t.TempDir(), &queue.Options{AckTimeout: ackTimeout, MaxMessageSize: maxMessageSize})
	})
}
