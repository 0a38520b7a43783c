package queue_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestDedupWindowAcrossRestart: an acked producer-given id stays refused
// for DedupWindow after its ack across restarts, whether its ack lives in
// the snapshot of a compaction (the log before it cut off) or only in the
// log after it, after a clean Close and after a crash, and the restarted
// queue accepts it a nanosecond after its window, as the running queue
// does (TestDedupWindowBoundary). Each restart comes at a later time than
// the one before, always inside the window until the last step.
func TestDedupWindowAcrossRestart(t *testing.T) {
	for _, c := range []struct {
		name     string
		compact  bool // the ack is in the snapshot of a compaction
		crash    bool // each restart opens a crash image, not a cleanly closed directory
		filler   int  // messages enqueued and acked after the ack, so that the compaction cuts the log
		ackFirst bool // the id is acked before the compaction; otherwise after it
	}{
		{name: "ack in snapshot, clean close", compact: true, filler: 100, ackFirst: true},
		{name: "ack in snapshot, crash", compact: true, crash: true, filler: 100, ackFirst: true},
		{name: "ack after snapshot, clean close", compact: true, filler: 100},
		{name: "ack after snapshot, crash", compact: true, crash: true, filler: 100},
		{name: "no compaction, crash", crash: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			clk, dir := newFakeClock(), t.TempDir()
			o := &queue.Options{Clock: clk, DedupWindow: time.Hour, SegmentSize: 4096, ManualRequeue: true}
			q := open(t, dir, o)
			ackX := func() {
				enqueue(t, q, "a", queue.WithID("x"))
				require.NoError(t, tryDequeue(t, q).Ack())
			}
			if c.ackFirst {
				ackX()
			}
			for i := 0; i < c.filler; i++ {
				enqueue(t, q, string(make([]byte, 100)))
				require.NoError(t, tryDequeue(t, q).Ack())
			}
			if c.compact {
				require.NoError(t, q.Compact())
				require.NotEqual(t, "00000000000000000001", filepath.Base(segments(t, dir)[0]), "the compaction cut the log's front")
			}
			if !c.ackFirst {
				ackX()
			}
			restart := func(after time.Duration) {
				t.Helper()
				clk.Advance(after)
				if c.crash {
					img := crashImage(t, dir)
					require.NoError(t, q.Close())
					dir = img
				} else {
					require.NoError(t, q.Close())
				}
				q = open(t, dir, o)
			}
			dup := func(why string) {
				t.Helper()
				_, err := q.Enqueue(ctx, []byte("again"), queue.WithID("x"))
				require.ErrorIs(t, err, queue.ErrDuplicate, why)
			}
			restart(time.Minute)
			dup("a minute after its ack, after a restart")
			require.NoError(t, q.Compact())
			restart(58 * time.Minute)
			dup("59 minutes after its ack, after a compaction and a restart")
			restart(time.Minute)
			dup("acked exactly DedupWindow ago, after a restart")
			restart(time.Nanosecond)
			enqueue(t, q, "b", queue.WithID("x"))
			require.Equal(t, "b", string(tryDequeue(t, q).Payload))
			require.NoError(t, q.Close())
		})
	}
}
