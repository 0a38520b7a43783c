package queue_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestDeadLettersWhileCopiedForward: DeadLetters reads each dead letter's
// payload where the index says it is; a compaction that has just copied it
// forward points the index at a record appended but maybe not yet written,
// and the read failed ("record not in log: LSN n outside [1, n-1]"). The
// interleaving is the housekeeper's: the case runs many rounds. Found by
// FuzzQueueModel.
func TestDeadLettersWhileCopiedForward(t *testing.T) {
	o := queue.Options{Sync: queue.SyncAlways, SegmentSize: 4096, SnapshotBytes: 4096, MaxDeliveries: 1}
	q := open(t, t.TempDir(), &o)
	defer q.Close()
	big := bytes.Repeat([]byte("x"), 3000)
	// Dead letters pin the front of the log: every compaction that finds
	// the log over its bound copies them forward.
	for i := range 3 {
		enqueue(t, q, fmt.Sprint("dead", i, "|", string(big)))
		require.NoError(t, tryDequeue(t, q).DeadLetter("pin"))
	}
	for i := range 150 {
		// Each round writes about a segment: the housekeeper compacts.
		enqueue(t, q, string(big))
		require.NoError(t, tryDequeue(t, q).Ack())
		dl, err := q.DeadLetters(0, 10)
		require.NoError(t, err, "round %d", i)
		require.Len(t, dl, 3)
	}
}
