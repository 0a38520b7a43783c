package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Windowed.Publish stamped a value with time.Now, while the queue judges
// whether a window has closed with its own clock (a base of the system
// clock plus the monotonic time since, rebased every wallResync). After a
// step of the system's wall clock the two disagree until the next rebase:
// stepped back, a value stamped with the new time came due at once;
// stepped forward, a Pull slept Window plus the step. The base here is an
// hour off the system's wall clock and is held (resync of an hour), as
// it is for up to wallResync after a step. Publish now stamps with the
// queue's own clock, so a batch is due Window after its publish by the
// same clock that judges it.
func TestWindowedPublishStampsWithTheQueueClock(t *testing.T) {
	const window = time.Minute
	for _, off := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(off.String(), func(t *testing.T) {
			o := &WindowOptions{Window: window}
			o.ManualRequeue, o.wallResync = true, time.Hour
			w, err := OpenWindowed(t.TempDir(), o)
			require.NoError(t, err)
			defer w.Close()
			now := time.Now()
			w.q.wall.set(now, now.UnixNano()+int64(off))

			require.NoError(t, w.Publish(context.Background(), "k", []byte("v")))
			_, err = w.TryPull(10)
			require.ErrorIs(t, err, ErrEmpty, "not due before Window has passed")
			w.q.mu.Lock()
			wait := w.q.untilPullableLocked(window)
			w.q.mu.Unlock()
			require.Positive(t, wait)
			require.LessOrEqual(t, wait, window, "due Window after its publish, not later")
		})
	}
}
