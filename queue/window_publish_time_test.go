package queue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// readingClock moves a millisecond at each reading: every two readings of
// the time differ.
type readingClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *readingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Millisecond)
	return c.now
}

func (c *readingClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// TestWindowedSortIsPublishTime: a windowed queue's sort key is the
// publish time, read once: a value's Sort and its PublishedAt are the same
// instant, pulled or dead, so that its key is due Window after its
// PublishedAt, as the package documentation says, and not after another
// reading of the clock, made earlier in the same Publish.
func TestWindowedSortIsPublishTime(t *testing.T) {
	ctx := context.Background()
	clk := &readingClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	w, err := queue.OpenWindowed(t.TempDir(), &queue.WindowOptions{Window: time.Millisecond,
		SortedOptions: queue.SortedOptions{Options: queue.Options{Clock: clk, MaxDeliveries: 1}}})
	require.NoError(t, err)
	defer w.Close()
	require.NoError(t, w.Publish(ctx, "k", []byte("v")))
	bs, err := w.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	v := bs[0].Values[0]
	require.Equal(t, v.PublishedAt.UnixNano(), v.Sort.UnixNano(), "pulled value: sort key and publish time")
	require.NoError(t, bs[0].DeadLetter("look at it dead"))
	ds, err := w.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, ds[0].PublishedAt.UnixNano(), ds[0].Sort.UnixNano(), "dead value: sort key and publish time")
}
