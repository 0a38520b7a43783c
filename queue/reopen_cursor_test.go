package queue_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestReopenAfterDrainedTruncation: a queue drained to empty and closed
// truncates its log past the cursor (nothing there is needed); the
// snapshot of the next Close, once messages were enqueued again, still
// named the old cursor, and the next Open refused the directory as
// corrupt ("the snapshot's messages need LSN 2: a segment is missing").
// Found by FuzzQueueModel.
func TestReopenAfterDrainedTruncation(t *testing.T) {
	dir := t.TempDir()
	o := queue.Options{Sync: queue.SyncNever, SegmentSize: 4096}
	q := open(t, dir, &o)
	enqueue(t, q, "big|"+string(bytes.Repeat([]byte("x"), 4000)))
	require.NoError(t, tryDequeue(t, q).Ack())
	require.NoError(t, q.Close())

	q = open(t, dir, &o)
	_, err := q.EnqueueBatch(context.Background(), []queue.Item{{Payload: []byte("a")}, {Payload: []byte("b")}})
	require.NoError(t, err)
	require.NoError(t, q.Close())

	q, err = queue.Open(dir, &o)
	require.NoError(t, err)
	defer q.Close()
	require.Equal(t, "a", string(tryDequeue(t, q).Payload))
	require.Equal(t, "b", string(tryDequeue(t, q).Payload))
	requireEmpty(t, q)
}
