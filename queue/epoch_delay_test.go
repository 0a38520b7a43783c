package queue_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestDelayBeforeEpoch: a delay (WithDelay, WithDeliverAt, a nack's) made
// while the clock reads a time before 1970, or that ends at the unix epoch
// exactly, holds the message back until its time, and then delivers it,
// live and after a crash alike. A delay's time before 1970 is a negative
// number of nanoseconds; the old code took only a positive one as a delay:
// a delayed enqueue's message was never delivered (the cursor left it to
// the table, which had not taken it), and a nack's delay was ignored.
func TestDelayBeforeEpoch(t *testing.T) {
	y1960 := time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name  string
		start time.Time
		delay func(t *testing.T, q *queue.Queue, now time.Time)
	}{
		{"delay", y1960, func(t *testing.T, q *queue.Queue, _ time.Time) {
			enqueue(t, q, "m", queue.WithDelay(10*time.Second))
		}},
		{"deliver-at", y1960, func(t *testing.T, q *queue.Queue, now time.Time) {
			enqueue(t, q, "m", queue.WithDeliverAt(now.Add(10*time.Second)))
		}},
		{"nack", y1960, func(t *testing.T, q *queue.Queue, _ time.Time) {
			enqueue(t, q, "m")
			require.NoError(t, tryDequeue(t, q).Nack(10*time.Second))
		}},
		{"delay-to-epoch", time.Unix(-10, 0), func(t *testing.T, q *queue.Queue, _ time.Time) {
			enqueue(t, q, "m", queue.WithDelay(10*time.Second))
		}},
		{"nack-to-epoch", time.Unix(-10, 0), func(t *testing.T, q *queue.Queue, _ time.Time) {
			enqueue(t, q, "m")
			require.NoError(t, tryDequeue(t, q).Nack(10*time.Second))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := newFakeClock()
			clock.Advance(c.start.Sub(clock.Now()))
			dir := t.TempDir()
			o := &queue.Options{Clock: clock, ManualRequeue: true, AckTimeout: time.Hour}
			q := open(t, dir, o)
			defer q.Close()
			c.delay(t, q, clock.Now())
			for _, step := range []struct {
				advance time.Duration
				want    string
			}{{9 * time.Second, "held"}, {time.Second + time.Nanosecond, "m"}} { // a delay to the epoch ends 1 ns after it
				clock.Advance(step.advance)
				img := crashImage(t, dir)
				r := open(t, img, o)
				require.Equal(t, step.want, nextPayload(t, r), "reopened, %v before the epoch", -clock.Now().Sub(time.Unix(0, 0)))
				require.NoError(t, r.Close())
				if step.want == "held" {
					require.Equal(t, step.want, nextPayload(t, q), "live, %v before the epoch", -clock.Now().Sub(time.Unix(0, 0)))
				}
			}
			require.Equal(t, "m", nextPayload(t, q), "live, once the delay ended")
		})
	}
}

// nextPayload returns the payload that a dequeue from q gets, or "held"
// when none is ready.
func nextPayload(t *testing.T, q *queue.Queue) string {
	t.Helper()
	m, err := q.TryDequeue()
	if err != nil {
		require.ErrorIs(t, err, queue.ErrEmpty)
		return "held"
	}
	return string(m.Payload)
}
