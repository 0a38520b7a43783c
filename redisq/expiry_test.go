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

// TestUnannouncedLeaseExpires: a lease whose deadline is no earlier than
// the last one announced is not announced, so the housekeepers must stay
// armed for that announced deadline even after a pass that found no
// lease (here those a short delay causes, after the first lease was acked).
// The later leases must run out near their deadlines, not at the
// housekeeper's idle recheck (30s).
func TestUnannouncedLeaseExpires(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	q, err := redisq.Open(ctx, srv.Client(), "unannounced", &redisq.Options{AckTimeout: 800 * time.Millisecond})
	require.NoError(t, err)
	defer q.Close()

	_, err = q.Enqueue(ctx, []byte("first"))
	require.NoError(t, err)
	m, err := q.Dequeue(ctx) // its deadline is announced
	require.NoError(t, err)
	require.NoError(t, m.Ack())

	// A delay kicks every housekeeper into a pass now and another when
	// it falls due: both find no lease.
	_, err = q.Enqueue(ctx, []byte("tick"), queue.WithDelay(20*time.Millisecond))
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond)

	_, err = q.Enqueue(ctx, []byte("second"))
	require.NoError(t, err)
	leased := time.Now()
	for _, want := range []string{"tick", "second"} { // neither deadline is announced
		m, err := q.Dequeue(ctx)
		require.NoError(t, err)
		require.Equal(t, want, string(m.Payload))
	}

	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, want := range []string{"tick", "second"} {
		again, err := q.Dequeue(wait)
		require.NoError(t, err, "the leases did not run out within 10s")
		require.Equal(t, want, string(again.Payload))
		require.Equal(t, 2, again.Deliveries)
		require.NoError(t, again.Ack())
	}
	require.Less(t, time.Since(leased), 10*time.Second)
}
