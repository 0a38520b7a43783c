package queue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/wal"
)

// readAheadQueue opens a queue holding the messages "a", "b" and "c" and
// reads "a" ahead as a dequeuer does before it takes q.mu; it returns with
// q.cur held, as that dequeuer holds it.
func readAheadQueue(t *testing.T) *Queue {
	t.Helper()
	q, err := Open(t.TempDir(), &Options{manualCompact: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	for _, p := range []string{"a", "b", "c"} {
		_, err := q.Enqueue(context.Background(), []byte(p))
		require.NoError(t, err)
	}
	q.cur.Lock()
	q.readAhead()
	require.Equal(t, "a", string(q.cur.ahead.msg.m.Payload))
	return q
}

// dequeueOnce dequeues a message and acks it, returning its payload.
func dequeueOnce(t *testing.T, q *Queue) string {
	t.Helper()
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, 1, m.Deliveries)
	require.NoError(t, m.Ack())
	return string(m.Payload)
}

// TestReadAheadOvertakenByCopyForward: a copy forward takes the message a
// delivery read ahead (its copy is delivered from the index), and moves
// the cursor past it without repositioning its reader. The look under
// q.mu must drop what was read ahead, not deliver the original a second
// time.
func TestReadAheadOvertakenByCopyForward(t *testing.T) {
	q := readAheadQueue(t)
	q.mu.Lock()
	from := q.mu.st.cursor
	q.mu.Unlock()
	cs, next, err := q.readCandidates(from, from+1) // "a" alone
	require.NoError(t, err)
	require.Len(t, cs, 1)
	moved, c, err := q.moveCandidates(cs, next)
	require.NoError(t, err)
	require.Equal(t, 1, moved)
	require.NoError(t, waitWritten(c))
	q.mu.Lock()
	require.False(t, q.mu.stale, "the cursor is past the original without a new reader")
	q.mu.Unlock()
	q.cur.Unlock()
	for _, want := range []string{"a", "b", "c"} {
		require.Equal(t, want, dequeueOnce(t, q))
	}
	_, err = q.TryDequeue()
	require.ErrorIs(t, err, ErrEmpty)
}

// TestReadAheadBesideCursorReset: an advance of the cursor past the
// message a delivery read ahead, while that delivery holds q.cur, leaves
// the reader for the delivery's look to reposition; the look drops what
// was read ahead with the old reader and releases it.
func TestReadAheadBesideCursorReset(t *testing.T) {
	q := readAheadQueue(t)
	q.mu.Lock()
	old, target := q.mu.cursor, q.mu.st.cursor+1
	q.mu.Unlock()
	require.NoError(t, q.advanceCursor(target, false)) // passes "a", as a purge of it would
	q.mu.Lock()
	require.True(t, q.mu.stale, "reset while q.cur is held")
	require.Same(t, old, q.mu.cursor)
	q.mu.Unlock()
	q.cur.Unlock()
	for _, want := range []string{"b", "c"} {
		require.Equal(t, want, dequeueOnce(t, q))
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	require.False(t, q.mu.stale)
	require.NotSame(t, old, q.mu.cursor, "the old reader is replaced")
	_, _, err := old.Next()
	require.ErrorIs(t, err, wal.ErrClosed, "and closed")
}
