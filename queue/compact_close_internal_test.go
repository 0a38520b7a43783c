package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCompactionAfterClose: the compaction of a Compact that passed its
// check of a closed queue before Close, and that takes its turn only
// after Close's snapshot (Close waits for a compaction under way, not for
// one about to start), returns ErrClosed: it neither reports a compaction
// it did not make nor runs on while Close closes the log under it (which
// answered the closed log's error from the middle of its copies forward).
// The log is over its bound (a leased message pins segments of acked
// ones), so such a compaction would copy forward.
func TestCompactionAfterClose(t *testing.T) {
	ctx := context.Background()
	q, err := Open(t.TempDir(), &Options{SegmentSize: 4096, AckTimeout: time.Hour, manualCompact: true})
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("old"))
	require.NoError(t, err)
	_, err = q.TryDequeue() // leased: it pins the log's front
	require.NoError(t, err)
	for range 100 {
		_, err := q.Enqueue(ctx, make([]byte, 100))
		require.NoError(t, err)
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.Ack())
	}
	require.True(t, q.overBound(q.mu.st.liveBytes()), "the log is over its bound before Close")
	require.NoError(t, q.Close())
	require.ErrorIs(t, q.compact(), ErrClosed)
}
