package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestStatsOldestSortedValue: a sorted or windowed queue's
// OldestEnqueuedAt is the publish time of its oldest live value, pending
// or leased, by the queue's clock, across a reopen; a value acked or
// dead leaves it, and a queue without live values has none.
func TestStatsOldestSortedValue(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reopen bool // the values are replayed from the log
	}{{"live", false}, {"replayed", true}} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			dir := t.TempDir()
			o := &queue.WindowOptions{Window: time.Second,
				SortedOptions: queue.SortedOptions{Options: queue.Options{Clock: clock, ManualRequeue: true}}}
			w, err := queue.OpenWindowed(dir, o)
			require.NoError(t, err)
			defer func() { w.Close() }()
			first := clock.Now()
			require.NoError(t, w.Publish(context.Background(), "a", []byte("1")))
			clock.Advance(time.Minute)
			second := clock.Now()
			require.NoError(t, w.Publish(context.Background(), "b", []byte("2")))
			require.NoError(t, w.Publish(context.Background(), "a", []byte("3")))
			if tc.reopen {
				require.NoError(t, w.Close())
				w, err = queue.OpenWindowed(dir, o)
				require.NoError(t, err)
			}
			clock.Advance(time.Hour)
			require.Equal(t, first.UnixNano(), w.Stats().OldestEnqueuedAt.UnixNano(), "pending")
			bs, err := w.TryPull(1)
			require.NoError(t, err)
			require.Len(t, bs, 1)
			require.Equal(t, "a", bs[0].Key)
			require.Equal(t, first.UnixNano(), w.Stats().OldestEnqueuedAt.UnixNano(), "leased")
			require.NoError(t, bs[0].Ack())
			require.Equal(t, second.UnixNano(), w.Stats().OldestEnqueuedAt.UnixNano(), "a acked")
			bs, err = w.TryPull(1)
			require.NoError(t, err)
			require.NoError(t, bs[0].DeadLetter("bad"))
			require.True(t, w.Stats().OldestEnqueuedAt.IsZero(), "b dead: %v", w.Stats().OldestEnqueuedAt)
		})
	}
}
