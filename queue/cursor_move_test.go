package queue

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/index"
)

// A compaction's copies of never-delivered messages and the advance of the
// cursor after them may land in different log entries, and a crash can
// keep the copies and lose the advance. Replay must then still have each
// copied message once: the copy moves the cursor past its original by
// itself. (Found by the kill -9 loop; fuzz/move_crash_test.go rebuilds
// that crash state from a real log.)
func TestCursorMoveWithoutAdvance(t *testing.T) {
	st := newState(&Options{})
	recs := []record{
		{Op: opEnqueue, ID: "a", At: 1, Payload: []byte("a")}, // LSN 1
		{Op: opEnqueue, ID: "b", At: 2, Payload: []byte("b")}, // LSN 2
		{Op: opEnqueue, ID: "c", At: 3, Payload: []byte("c")}, // LSN 3
		{Op: opMove, Seq: 1, Flags: flagCursor, ID: "a", Enq: 1, Size: 40, Payload: []byte("a")},
		{Op: opMove, Seq: 2, Flags: flagCursor, ID: "b", Enq: 2, Size: 40, Payload: []byte("b")},
	}
	for i := range recs {
		require.NoError(t, st.apply(uint64(i+1), &recs[i], 40), "record %d", i+1)
	}
	require.EqualValues(t, 3, st.cursor, "the cursor passed the originals of the copies")
	require.EqualValues(t, 1, st.pending, "only c is left to the cursor")
	e, ok := st.table.FirstReady()
	require.True(t, ok)
	require.Equal(t, index.Entry{Seq: 1, Loc: 4, ID: "a", Size: 40, EnqueuedAt: 1, State: index.Ready, Undelivered: true}, e)
	require.Equal(t, index.Counts{Ready: 2}, st.table.Counts(), "each copy once")
}
