package redisq_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestStatsCounters: the counts of enqueued and acked messages are derived
// from the sequence counter and what is live (see scripts/common.lua), so
// a purge, a requeued dead letter, an AckID and a refused duplicate must
// each leave them where the embedded queue would.
func TestStatsCounters(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	q, err := redisq.Open(ctx, srv.Client(), "counters", &redisq.Options{MaxDeliveries: 1})
	require.NoError(t, err)
	defer q.Close()
	for _, id := range []string{"a", "b", "c", "d"} {
		_, err := q.Enqueue(ctx, []byte(id), queue.WithID(id))
		require.NoError(t, err)
	}
	_, err = q.Enqueue(ctx, []byte("a"), queue.WithID("a"))
	require.ErrorIs(t, err, queue.ErrDuplicate)
	next := func() *queue.Message {
		t.Helper()
		m, err := q.TryDequeue()
		require.NoError(t, err)
		return m
	}
	steps := []struct {
		name                       string
		do                         func()
		enqueued, delivered, acked uint64
	}{
		{"ack", func() { require.NoError(t, next().Ack()) }, 4, 1, 1},
		{"dead letter, purged", func() {
			require.NoError(t, next().Nack(0))
			require.NoError(t, q.PurgeDead("b"))
		}, 4, 2, 1},
		{"ack by id", func() {
			next()
			require.NoError(t, q.AckID("c"))
		}, 4, 3, 2},
		{"dead letter, requeued, acked", func() {
			require.NoError(t, next().Nack(0))
			n, err := q.RequeueAllDead()
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.NoError(t, next().Ack())
		}, 4, 5, 3},
		{"batch", func() {
			_, err := q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("e")}, {Payload: []byte("f")}})
			require.NoError(t, err)
			ms, err := q.DequeueBatch(ctx, 2)
			require.NoError(t, err)
			require.NoError(t, ms.Ack())
		}, 6, 7, 5},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.do()
			st, err := q.StatsContext(ctx)
			require.NoError(t, err)
			require.Equal(t, s.enqueued, st.Enqueued, "enqueued")
			require.Equal(t, s.delivered, st.Delivered, "delivered")
			require.Equal(t, s.acked, st.Acked, "acked")
		})
	}
}
