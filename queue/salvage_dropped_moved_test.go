package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
)

// A never-delivered message that a compaction copied forward is indexed
// (a ready entry whose payload is the copy), so a salvage that loses the
// copy names it in Recovery.Dropped, and its Seq, the LSN of its enqueue
// record, which the compaction removed, is not among the LSNs lost: the
// LSN lost is the copy's.
func TestSalvageDroppedNamesMovedNeverDelivered(t *testing.T) {
	dir := t.TempDir()
	clock := fakeclock.New()
	q, err := Open(dir, &Options{SegmentSize: 4096, Clock: clock, manualCompact: true})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = q.Enqueue(ctx, []byte("F"), WithID("F"))
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("payload of N-MARK"), WithID("N")) // never delivered
	require.NoError(t, err)
	f, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "F", f.ID)
	for q.log.Size() < 8*q.opts.SegmentSize { // the log grows past N with F's extends
		require.NoError(t, f.Extend(time.Minute))
	}
	require.NoError(t, f.Ack())
	require.NoError(t, q.compact())
	q.mu.Lock()
	moved := q.mu.st.counts.Moved
	q.mu.Unlock()
	require.NotZero(t, moved, "the compaction copied N forward")
	require.NoError(t, q.Close())
	loseRecords(t, dir, "N-MARK")

	shown := previewDropped(t, dir, clock)
	rep, err := Repair(dir, nil)
	require.NoError(t, err)
	require.Equal(t, []Lost{{Seq: 2, ID: "N"}}, rep.Recovery.Dropped)
	require.Equal(t, rep.Recovery.Dropped, shown)
	for _, r := range rep.LostLSNs() {
		require.False(t, r[0] <= 2 && (r[1] == 0 || r[1] >= 2), "N's Seq is not among the LSNs lost: %v", rep.LostLSNs())
	}
}
