package queue_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// A never-delivered message that a compaction copies forward stays among
// the never-delivered messages: a message ready again that was enqueued
// after it is still delivered first, as the documented order says, live,
// after a crash that replays the copy records, after a crash that loads
// the snapshot holding the copy, and after a clean reopen.
func TestCopyForwardKeepsNeverDeliveredLast(t *testing.T) {
	want := []string{"again", "never", "never2"}
	q, dir, replayImg, opts := compactedQueue(t)
	snapImg := crashImage(t, dir)
	requireOrder(t, q, want)
	require.NoError(t, q.Close())

	q, cleanDir, _, _ := compactedQueue(t)
	require.NoError(t, q.Close())
	for name, d := range map[string]string{"replay": replayImg, "snapshot": snapImg, "clean": cleanDir} {
		t.Run(name, func(t *testing.T) {
			q := open(t, d, opts)
			defer q.Close()
			requireOrder(t, q, want)
		})
	}
}

// compactedQueue returns a queue whose compaction copied forward two
// never-delivered messages ("never", "never2") and one enqueued between
// them that is ready again ("again"), with its directory, a crash image
// taken while the snapshot after the copies was being written (its replay
// meets the copy records), and its options.
func compactedQueue(t *testing.T) (*queue.Queue, string, string, *queue.Options) {
	t.Helper()
	clock := newFakeClock()
	opts := &queue.Options{Clock: clock, SegmentSize: 4096, AckTimeout: time.Hour}
	testhook.SetManualCompaction(opts)
	dir := t.TempDir()
	var q *queue.Queue
	var replayImg string
	testhook.SetSnapshotStep(opts, func(step string) {
		if step == "written" && replayImg == "" && q.Stats().Moved > 0 {
			replayImg = crashImage(t, dir)
		}
	})
	q = open(t, dir, opts)
	enqueue(t, q, "never")
	enqueue(t, q, "again", queue.WithDelay(time.Second))
	enqueue(t, q, "never2")
	clock.Advance(2 * time.Second)
	m := tryDequeue(t, q)
	require.Equal(t, "again", string(m.Payload), "a due delayed message goes first")
	for range 500 { // records behind "never" that pin nothing: the log outgrows its bound
		require.NoError(t, m.Extend(time.Hour))
	}
	require.NoError(t, m.Nack(0))
	require.NoError(t, q.Compact())
	require.NotZero(t, q.Stats().Moved, "the compaction copied the old messages forward")
	require.NotEmpty(t, replayImg)
	return q, dir, replayImg, opts
}

// requireOrder dequeues every ready message and checks their payloads.
func requireOrder(t *testing.T, q *queue.Queue, want []string) {
	t.Helper()
	var got []string
	for range want {
		m := tryDequeue(t, q)
		got = append(got, string(m.Payload))
	}
	require.Equal(t, want, got)
	requireEmpty(t, q)
}
