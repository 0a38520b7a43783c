package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/testhook"
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

// TestDedupForgetDuringSnapshotKept: an enqueue that forgets an acked id
// (its window passed) while a snapshot is being written, and appends
// nothing (ErrDuplicate on another id), must leave the next snapshot due:
// the one being written was frozen before the forget and still holds the
// id. The doc promises the forget is kept by the next compaction.
func TestDedupForgetDuringSnapshotKept(t *testing.T) {
	const short = 5 * time.Second
	clk, dir := newFakeClock(), t.TempDir()
	ackUnderWindow(t, clk, dir, "x")
	opts := &queue.Options{Clock: clk, DedupWindow: short}
	testhook.SetManualCompaction(opts)
	var q *queue.Queue
	armed := false
	testhook.SetSnapshotStep(opts, func(step string) {
		if step == "written" && armed {
			armed = false
			clk.Advance(short + time.Second) // x's window passes now
			_, err := q.Enqueue(context.Background(), []byte("dup"), queue.WithID("y"))
			require.ErrorIs(t, err, queue.ErrDuplicate) // forgets x, appends nothing
		}
	})
	q = open(t, dir, opts)
	enqueue(t, q, "y", queue.WithID("y")) // a live id, and a record to snapshot
	armed = true
	require.NoError(t, q.Compact()) // frozen with x; the enqueue above forgets x during the write
	require.Equal(t, 1, q.Stats().DedupIDs, "x forgotten, y live")
	require.NoError(t, q.Compact()) // must keep the forget
	img := crashImage(t, dir)
	require.NoError(t, q.Close())
	q2 := open(t, img, &queue.Options{Clock: clk, DedupWindow: time.Hour})
	defer q2.Close()
	_, err := q2.Enqueue(context.Background(), []byte("b"), queue.WithID("x"))
	require.NoError(t, err, "x was forgotten before the last compaction; a later open must not bring it back")
}

// TestDedupIdleWindowNoSnapshotLoop: an idle queue with a window whose
// acked ids expire does not snapshot again and again in the background.
func TestDedupIdleWindowNoSnapshotLoop(t *testing.T) {
	clk, dir := newFakeClock(), t.TempDir()
	q := open(t, dir, &queue.Options{Clock: clk, DedupWindow: time.Second})
	defer q.Close()
	for i := range 20 {
		enqueue(t, q, "a", queue.WithID(fmt.Sprint(i)))
		require.NoError(t, tryDequeue(t, q).Ack())
	}
	require.NoError(t, q.Compact())
	lsn, at := q.Stats().SnapshotLSN, q.Stats().SnapshotAt
	for range 20 {
		clk.Advance(time.Second)
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, 20, q.Stats().DedupIDs, "no enqueue nor snapshot since: still counted")
	require.Equal(t, lsn, q.Stats().SnapshotLSN)
	require.Equal(t, at, q.Stats().SnapshotAt, "no background snapshot on an idle queue")
	require.NoError(t, q.Compact())
	require.Equal(t, 0, q.Stats().DedupIDs, "the compaction forgot them")
	at2 := q.Stats().SnapshotAt
	require.NoError(t, q.Compact())
	require.Equal(t, at2, q.Stats().SnapshotAt, "a second compaction with nothing new writes nothing")
}
