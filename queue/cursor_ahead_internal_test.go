package queue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/wal"
)

// readAheadQueue opens a queue holding the messages "a", "b" and "c" and
// reads them ahead, as a dequeuer does before it takes q.mu.
func readAheadQueue(t *testing.T) *Queue {
	t.Helper()
	q, err := Open(t.TempDir(), &Options{manualCompact: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	for _, p := range []string{"a", "b", "c"} {
		_, err := q.Enqueue(context.Background(), []byte(p))
		require.NoError(t, err)
	}
	q.readAhead()
	q.ahead.Lock()
	defer q.ahead.Unlock()
	require.Len(t, q.ahead.msgs, 3)
	require.Equal(t, "a", string(q.ahead.msgs[0].m.Payload))
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

// TestReadAheadOvertakenByCopyForward: a copy forward takes a message that
// waits in the read-ahead FIFO (its copy is delivered from the index) and
// moves the cursor past it without repositioning the reader, so the FIFO
// keeps its entry. The lease must drop that entry, not deliver the
// original a second time.
func TestReadAheadOvertakenByCopyForward(t *testing.T) {
	q := readAheadQueue(t)
	q.mu.Lock()
	from := q.mu.st.cursor
	q.mu.Unlock()
	cs, next, err := q.readCandidates(from, from+1) // "a" alone
	require.NoError(t, err)
	require.Len(t, cs, 1)
	gen := q.aheadGen()
	moved, c, err := q.moveCandidates(cs, next)
	require.NoError(t, err)
	require.Equal(t, 1, moved)
	require.NoError(t, waitWritten(c))
	require.Equal(t, gen, q.aheadGen(), "the copy left the FIFO as it was")
	for _, want := range []string{"a", "b", "c"} {
		require.Equal(t, want, dequeueOnce(t, q))
	}
	_, err = q.TryDequeue()
	require.ErrorIs(t, err, ErrEmpty)
}

// TestReadAheadBesideCursorReset: an advance of the cursor past "a" while a
// read ahead holds the reader (it read "a" and has not pushed it yet)
// empties the FIFO and leaves the reader for the next look to reposition;
// the read ahead's push is refused, the look replaces and closes the old
// reader, and "a" is never delivered.
func TestReadAheadBesideCursorReset(t *testing.T) {
	q := readAheadQueue(t)
	q.mu.Lock()
	target := q.mu.st.cursor + 1
	q.mu.Unlock()
	q.rd.Lock() // a read ahead under way
	old, gen := q.rd.cursor, q.aheadGen()
	require.NoError(t, q.advanceCursor(target, false)) // passes "a", as a purge of it would
	q.ahead.Lock()
	require.True(t, q.ahead.stale, "reset while q.rd is held")
	require.Empty(t, q.ahead.msgs)
	q.ahead.Unlock()
	cr := readCursor(old, 0)
	require.False(t, q.pushAhead(gen, cr), "a read begun before the reset is pushed")
	q.rd.Unlock()
	for _, want := range []string{"b", "c"} {
		require.Equal(t, want, dequeueOnce(t, q))
	}
	_, err := q.TryDequeue()
	require.ErrorIs(t, err, ErrEmpty)
	q.rd.Lock()
	defer q.rd.Unlock()
	require.NotSame(t, old, q.rd.cursor, "the old reader is replaced")
	_, _, err = old.Next()
	require.ErrorIs(t, err, wal.ErrClosed, "and closed")
}

// TestLookBesideReadAhead: a look under q.mu alone that finds the FIFO
// empty while a read ahead holds the reader is not conclusive (the message
// is only at the cursor): it says so rather than find nothing, and the
// look made with the reader's lock taken first leases the message.
func TestLookBesideReadAhead(t *testing.T) {
	q, err := Open(t.TempDir(), &Options{manualCompact: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	_, err = q.Enqueue(context.Background(), []byte("a"))
	require.NoError(t, err)
	q.rd.Lock() // a read ahead under way
	q.mu.Lock()
	ds, _, err := q.leaseLocked(1, nil, q.now(), false)
	q.mu.Unlock()
	q.rd.Unlock()
	require.Empty(t, ds)
	require.ErrorIs(t, err, errAheadBusy)
	q.mu.Lock()
	ds, c, err := q.lookLocked(1, nil, q.now())
	q.mu.Unlock()
	require.NoError(t, err)
	require.NoError(t, waitWritten(c))
	require.Len(t, ds, 1)
	require.Equal(t, "a", string(ds[0].m.Payload))
}

// aheadGen returns the FIFO's generation.
func (q *Queue) aheadGen() uint64 {
	q.ahead.Lock()
	defer q.ahead.Unlock()
	return q.ahead.gen
}
