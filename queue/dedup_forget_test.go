package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// TestDedupShorterWindowForgetKept: an open with a shorter dedup window
// forgets an acked id once its window has passed, though it enqueues
// nothing that would look; its next snapshot (Close, or a Compact that
// appended nothing, then a crash) keeps the forget, so a later open with
// a longer window accepts the id. An id acked exactly the shorter window
// ago is still within it: kept, and refused by the later open.
func TestDedupShorterWindowForgetKept(t *testing.T) {
	const short = 5 * time.Second
	for name, c := range map[string]struct {
		wait   time.Duration
		crash  bool
		forgot bool
	}{
		"window passed, close":         {wait: short + time.Second, forgot: true},
		"window passed, compact+crash": {wait: short + time.Second, crash: true, forgot: true},
		"at the window, close":         {wait: short},
		"at the window, compact+crash": {wait: short, crash: true},
	} {
		t.Run(name, func(t *testing.T) {
			clk, dir := newFakeClock(), t.TempDir()
			ackUnderWindow(t, clk, dir, "x")
			q := open(t, dir, &queue.Options{Clock: clk, DedupWindow: short})
			clk.Advance(c.wait)
			d := dir
			if c.crash {
				require.NoError(t, q.Compact())
				d = crashImage(t, dir)
			}
			require.NoError(t, q.Close())
			q = open(t, d, &queue.Options{Clock: clk, DedupWindow: time.Hour})
			defer q.Close()
			_, err := q.Enqueue(context.Background(), []byte("b"), queue.WithID("x"))
			if c.forgot {
				require.NoError(t, err, "id forgotten by the open with the shorter window")
			} else {
				require.ErrorIs(t, err, queue.ErrDuplicate, "id acked exactly the shorter window ago")
			}
		})
	}
}
