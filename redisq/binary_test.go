package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestBinaryIDAndReason: ids and dead-letter reasons are any bytes, a NUL
// or a ':' among them, through every path that rewrites a message's
// record: lease one and several, nack, dead-letter, list and requeue.
func TestBinaryIDAndReason(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	q, err := redisq.Open(ctx, srv.Client(), "binary", &redisq.Options{DedupWindow: time.Hour})
	require.NoError(t, err)
	defer q.Close()
	ids := []string{"a\x00b:1", "\x00", "c:\x00\x00d"}
	_, err = q.EnqueueBatch(ctx, []queue.Item{{ID: ids[0], Payload: []byte("x")}, {ID: ids[1], Payload: []byte("y")}})
	require.NoError(t, err)

	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, ids[0], m.ID)
	require.NoError(t, m.Nack(0))
	ms, err := q.DequeueBatch(ctx, 2)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	require.Equal(t, []string{ids[0], ids[1]}, []string{ms[0].ID, ms[1].ID})
	require.Equal(t, 2, ms[0].Deliveries)
	require.NoError(t, ms[1].Ack())

	const reason = "why\x00not: this"
	require.NoError(t, ms[0].DeadLetter(reason))
	dead, err := q.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, ids[0], dead[0].ID)
	require.Equal(t, reason, dead[0].Reason)
	require.NoError(t, q.RequeueDead(ids[0]))
	_, err = q.EnqueueBatch(ctx, []queue.Item{{ID: ids[2], Payload: []byte("z")}})
	require.NoError(t, err)
	for _, want := range []string{ids[0], ids[2]} {
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.Equal(t, want, m.ID)
		require.NoError(t, q.AckID(want))
	}
	s := q.Stats()
	require.Zero(t, s.Ready+s.InFlight+s.Delayed+s.Dead)
	for _, id := range ids { // each acked id's stamp refuses it again
		_, err := q.EnqueueBatch(ctx, []queue.Item{{ID: id, Payload: []byte("again")}})
		require.ErrorIs(t, err, queue.ErrDuplicate, "id %q", id)
	}
}
