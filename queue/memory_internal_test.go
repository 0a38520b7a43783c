package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The README's memory guarantee, counted in the indexes: a message that
// was never delivered has no entry (it is a record after the log cursor),
// live and after a reopen; a delivered-not-acked or delayed message has
// one entry, and an acked one none; a producer-given id has one dedup
// entry.
func TestNeverDeliveredCostsNoEntry(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const n = 1000
	q, err := Open(dir, &Options{ManualRequeue: true})
	require.NoError(t, err)
	for range n {
		_, err := q.Enqueue(ctx, []byte("never delivered"))
		require.NoError(t, err)
	}
	requireEntries(t, q, "after the enqueues", 0, 0)
	require.NoError(t, q.Close())

	q, err = Open(dir, &Options{ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	requireEntries(t, q, "after a reopen", 0, 0)

	m, err := q.TryDequeue()
	require.NoError(t, err)
	requireEntries(t, q, "with one delivered, not acked", 1, 0)
	require.NoError(t, m.Ack())
	requireEntries(t, q, "once it is acked", 0, 0)

	_, err = q.Enqueue(ctx, []byte("delayed"), WithDelay(time.Hour))
	require.NoError(t, err)
	requireEntries(t, q, "with one delayed", 1, 0)
	_, err = q.Enqueue(ctx, []byte("with an id"), WithID("order-1"))
	require.NoError(t, err)
	requireEntries(t, q, "with one producer-given id", 1, 1)
	require.Equal(t, int64(n), q.Stats().Ready, "the n-1 never delivered and the one with an id are ready, counted without entries")
}

// requireEntries checks how many entries the message table and the dedup
// set hold.
func requireEntries(t *testing.T, q *Queue, when string, table, dedup int) {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	require.Equal(t, table, q.mu.st.table.Len(), "message table entries %s", when)
	require.Equal(t, dedup, q.mu.st.dedup.Len(), "dedup entries %s", when)
}
