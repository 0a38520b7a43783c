package queue_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// TestSalvageFirstEntry is a regression test found by the damage suite
// (fuzz/damage_test.go): when the log's first entry is damaged (no
// snapshot yet), a salvaging Open refused the log with "log starts at LSN
// 2, after snapshot LSN 0" although the report accounted for the gap, and
// the report could not say which LSNs were lost there. The salvage now
// replays from the log's first LSN and reports the entry's LSNs.
func TestSalvageFirstEntry(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{SegmentSize: 4096})
	defer q.Close()
	var want []string
	for i := 0; i < 120; i++ {
		want = append(want, fmt.Sprintf("V%03d%s", i, strings.Repeat("x", 60+i%100)))
		enqueue(t, q, want[i])
	}
	img := crashImage(t, dir) // no snapshot: every record is in the log
	first := segments(t, img)[0]
	b, err := os.ReadFile(first)
	require.NoError(t, err)
	_, k := binary.Uvarint(b) // the frame's length, then the entry: CRC (4B), version (1B), first LSN (8B), count (4B)
	lastLost := binary.LittleEndian.Uint64(b[k+5:]) + uint64(binary.LittleEndian.Uint32(b[k+13:])) - 1
	b[k] ^= 1 // the entry's CRC
	require.NoError(t, os.WriteFile(first, b, 0o600))

	q2, err := queue.Open(img, &queue.Options{SegmentSize: 4096, Salvage: true})
	require.NoError(t, err)
	defer q2.Close()
	s := q2.Recovery().Log.Salvaged
	require.Len(t, s, 1)
	require.EqualValues(t, 1, s[0].FirstLSN, "the first LSN lost")
	require.Equal(t, lastLost, s[0].LastLSN)
	require.Equal(t, filepath.Base(first), filepath.Base(s[0].Segment))
	requireOrder(t, q2, want[lastLost:]) // message i is LSN i+1
}
