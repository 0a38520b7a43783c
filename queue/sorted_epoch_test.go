package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestSortedNackDelayBeforeEpoch: a sorted batch's nack delay made while
// the clock reads a time before 1970, or that ends at the unix epoch
// exactly, holds its key back until its time, live and after a crash
// alike, as a message's nack delay does (TestDelayBeforeEpoch).
func TestSortedNackDelayBeforeEpoch(t *testing.T) {
	for _, c := range []struct {
		name  string
		start time.Time
	}{
		{"nack", time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"nack-to-epoch", time.Unix(-10, 0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := newFakeClock()
			clock.Advance(c.start.Sub(clock.Now()))
			dir := t.TempDir()
			o := &queue.SortedOptions{Options: queue.Options{Clock: clock, ManualRequeue: true, AckTimeout: time.Hour}}
			s, err := queue.OpenSorted[int64](dir, o)
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, s.Publish(context.Background(), 1, "k", []byte("v")))
			bs, err := s.TryPull(1)
			require.NoError(t, err)
			require.NoError(t, bs[0].Nack(10*time.Second))
			for _, step := range []struct {
				advance time.Duration
				want    string
			}{{9 * time.Second, "held"}, {time.Second + time.Nanosecond, "v"}} { // a delay to the epoch ends 1 ns after it
				clock.Advance(step.advance)
				r, err := queue.OpenSorted[int64](crashImage(t, dir), o)
				require.NoError(t, err)
				require.Equal(t, step.want, nextSortedPayload(t, r), "reopened, %v before the epoch", -clock.Now().Sub(time.Unix(0, 0)))
				require.NoError(t, r.Close())
				if step.want == "held" {
					require.Equal(t, step.want, nextSortedPayload(t, s), "live, %v before the epoch", -clock.Now().Sub(time.Unix(0, 0)))
				}
			}
			require.Equal(t, "v", nextSortedPayload(t, s), "live, once the delay ended")
		})
	}
}

// nextSortedPayload returns the payload of the first value a pull from s
// gets, or "held" when none is pullable.
func nextSortedPayload(t *testing.T, s *queue.Sorted[int64]) string {
	t.Helper()
	bs, err := s.TryPull(1)
	if err != nil {
		require.ErrorIs(t, err, queue.ErrEmpty)
		return "held"
	}
	return string(bs[0].Payloads()[0])
}
