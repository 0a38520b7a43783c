package queue

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/internal/testhook"
)

// TestPeekOvertakenByPurgeAndCompact: a dead letter purged after Peek
// looked it up and before it read its payload, and compacted out of the
// log, is gone: Peek says ErrNotFound, as it says of a letter purged
// before the call, not the log's "record not in log".
func TestPeekOvertakenByPurgeAndCompact(t *testing.T) {
	o := Options{Sync: SyncAlways, SegmentSize: 4096}
	testhook.SetManualCompaction(&o)
	q, err := Open(t.TempDir(), &o)
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	_, err = q.Enqueue(ctx, []byte("dead|"+string(bytes.Repeat([]byte("d"), 1500))), WithID("d"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("pin"))
	seq := m.Receipt.Seq
	for range 12 { // acked messages behind it, for the compaction to drop
		_, err := q.Enqueue(ctx, bytes.Repeat([]byte("b"), 3000))
		require.NoError(t, err)
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.Ack())
	}
	q.peeking = func() {
		require.NoError(t, q.PurgeDead("d"))
		require.NoError(t, q.Compact())
	}
	_, err = q.Peek(seq)
	require.ErrorIs(t, err, ErrNotFound)
}

// TestPeekOvertakenByCopyForward: a never-delivered message that a
// compaction copies forward, out of the cursor's region, and cuts the log
// behind, after Peek looked it up and before it read it, is still there:
// Peek returns it whole, never ErrNotFound.
func TestPeekOvertakenByCopyForward(t *testing.T) {
	clk := fakeclock.New()
	o := Options{Sync: SyncAlways, SegmentSize: 4096, Clock: clk}
	testhook.SetManualCompaction(&o)
	q, err := Open(t.TempDir(), &o)
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	body := []byte("backlog|" + string(bytes.Repeat([]byte("k"), 1500)))
	_, err = q.Enqueue(ctx, body, WithID("k"))
	require.NoError(t, err)
	for range 12 { // delayed messages, delivered before it and acked
		_, err := q.Enqueue(ctx, bytes.Repeat([]byte("b"), 3000), WithDelay(time.Second))
		require.NoError(t, err)
		clk.Advance(time.Second)
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NotEqual(t, "k", m.ID)
		require.NoError(t, m.Ack())
	}
	ready, err := q.Browse(StateReady, 0, 10)
	require.NoError(t, err)
	require.Len(t, ready, 1)
	q.peeking = func() {
		require.NoError(t, q.Compact())
		require.NotZero(t, q.Stats().Moved)
	}
	info, err := q.Peek(ready[0].Seq)
	require.NoError(t, err)
	require.Equal(t, body, info.Payload)
}
