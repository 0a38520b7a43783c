package queue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPeekOvertakenByClose: a Close that runs after Peek checked the queue
// and before it read the log makes the Peek fail with ErrClosed, as every
// other call on a closed queue does, not with the log's own error; for a
// message that was delivered (its payload read through the index) and for
// one still at the cursor.
func TestPeekOvertakenByClose(t *testing.T) {
	for _, delivered := range []bool{true, false} {
		q, err := Open(t.TempDir(), &Options{ManualRequeue: true})
		require.NoError(t, err)
		_, err = q.Enqueue(context.Background(), []byte("payload"))
		require.NoError(t, err)
		if delivered {
			m, err := q.TryDequeue()
			require.NoError(t, err)
			require.NoError(t, m.Nack(0))
		}
		ready, err := q.Browse(StateReady, 0, 10)
		require.NoError(t, err)
		require.Len(t, ready, 1)
		q.peeking = func() { require.NoError(t, q.Close()) }
		_, err = q.Peek(ready[0].Seq)
		require.ErrorIs(t, err, ErrClosed, "delivered %v", delivered)
	}
}
