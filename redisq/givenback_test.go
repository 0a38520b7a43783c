package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestGivenBackNotDelivered: a lease taken for a grouped Dequeue whose
// caller left while its call was held (CLIENT PAUSE WRITE) is given
// back as never handed out. No consumer got it, so it is no delivery:
// with MaxDeliveries 2 and consumers that keep leaving, no message is
// dead-lettered, every message a consumer gets says it is its first
// delivery (each is acked the first time), and no nack is counted.
func TestGivenBackNotDelivered(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	q, err := redisq.Open(ctx, rdb, "givenback",
		&redisq.Options{AckTimeout: time.Minute, MaxDeliveries: 2})
	require.NoError(t, err)
	defer q.Close()
	const n = 200
	enqueueNumbered(t, q, n)
	holdWrites(t, srv)
	got := leavingConsumers(t, q, n)
	s, err := q.StatsContext(ctx)
	require.NoError(t, err)
	require.Zero(t, s.Dead, "dead-lettered, though no consumer got them: %+v", s)
	require.Zero(t, s.DeadLettered, "%+v", s)
	require.Zero(t, s.Nacked, "no consumer nacked: %+v", s)
	require.Equal(t, n, len(got), "every message acked within 30s: %+v", s)
	for id, ds := range got {
		require.Equal(t, []int{1}, ds, "message %s: the deliveries each consumer's receipt said", id)
	}
	require.Equal(t, uint64(n), s.Delivered, "deliveries counted: one per message a consumer got")
}
