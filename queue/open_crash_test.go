package queue_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestLostFrontSegmentIsCorrupt is a regression test found by the damage
// suite (fuzz/damage_test.go): with the first log segment gone, Open
// succeeded (the log still reached back to the snapshot) and the messages
// whose records were in it failed at every delivery with "record not in
// log" until they went to the dead-letter set.
func TestLostFrontSegmentIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{SegmentSize: 4096})
	for i := 0; i < 80; i++ {
		enqueue(t, q, fmt.Sprintf("%03d%s", i, strings.Repeat("x", 100)))
	}
	require.NoError(t, q.Close())
	segs := segments(t, dir)
	require.Greater(t, len(segs), 2)
	require.NoError(t, os.Remove(segs[0]))

	_, err := queue.Open(dir, nil)
	require.True(t, errors.Is(err, queue.ErrCorrupt), "Open: %v", err)
	require.Contains(t, err.Error(), "a segment is missing")
}

// TestDequeueAfterDrainedTruncation is a regression test found by the
// snapshot-step suite (fuzz/snapstep_test.go): once a compaction had cut a
// drained log to its tail segment, past the cursor, the cursor's reader
// still pointed into the removed segments, and every Dequeue failed with
// "read at cursor: record not in log" until the queue was reopened.
func TestDequeueAfterDrainedTruncation(t *testing.T) {
	q := open(t, t.TempDir(), &queue.Options{SegmentSize: 4096, SnapshotBytes: 1 << 30})
	defer q.Close()
	for i := 0; i < 40; i++ {
		enqueue(t, q, fmt.Sprintf("%03d%s", i, strings.Repeat("x", 100)))
	}
	for i := 0; i < 40; i++ {
		require.NoError(t, tryDequeue(t, q).Ack())
	}
	require.NoError(t, q.Compact())
	require.Len(t, q.Stats().Segments, 1, "the drained log keeps only its tail")
	enqueue(t, q, "after")
	require.Equal(t, "after", string(tryDequeue(t, q).Payload))
}
