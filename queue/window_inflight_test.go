package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// A value published while its key's batch is leased starts a new window,
// as the README says ("Values published after a batch was pulled start a
// new window"): it is due Window after its own publish, not at once
// because the key's earlier window had closed; with SingleFlight, not
// before the leased batch is acked either.
func TestWindowedPublishDuringLeaseStartsNewWindow(t *testing.T) {
	for _, single := range []bool{false, true} {
		t.Run(map[bool]string{false: "concurrent", true: "SingleFlight"}[single], func(t *testing.T) {
			clk := newFakeClock()
			w, err := queue.OpenWindowed(t.TempDir(), &queue.WindowOptions{
				SortedOptions: queue.SortedOptions{SingleFlight: single, Options: queue.Options{Clock: clk, AckTimeout: time.Hour}},
				Window:        3 * time.Second,
			})
			require.NoError(t, err)
			defer w.Close()
			ctx := context.Background()
			require.NoError(t, w.Publish(ctx, "customer-1", []byte("a")))
			clk.Advance(3 * time.Second)
			first, err := w.TryPull(100)
			require.NoError(t, err)
			require.Len(t, first, 1)
			require.Equal(t, []string{"a"}, payloads(first[0]))

			require.NoError(t, w.Publish(ctx, "customer-1", []byte("c")))
			_, err = w.TryPull(100)
			require.ErrorIs(t, err, queue.ErrEmpty, "c was just published: its window is open")
			clk.Advance(3*time.Second - time.Nanosecond)
			_, err = w.TryPull(100)
			require.ErrorIs(t, err, queue.ErrEmpty, "c's window closes Window after its publish")
			clk.Advance(time.Nanosecond)
			if single {
				_, err = w.TryPull(100)
				require.ErrorIs(t, err, queue.ErrEmpty, "with SingleFlight the key waits for its leased batch")
				require.NoError(t, first[0].Ack())
			}
			second, err := w.TryPull(100)
			require.NoError(t, err)
			require.Len(t, second, 1)
			require.Equal(t, []string{"c"}, payloads(second[0]))
		})
	}
}
