package redisq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestOpTimeoutBehindLoneEnqueue: an Ack and a TryDequeue, which take no
// context, give up within OpTimeout while the server holds writes (CLIENT
// PAUSE WRITE, as a failover does), also when a lone Enqueue of the same
// handle, whose context has no deadline, waits for the server: however a
// handle gathers its calls (a mixed call of Acks, Enqueues and lone
// Dequeues, tried in afae9ef, did hold them), the Enqueue's call must not
// hold the others past OpTimeout. The client ends
// a command's wait with its context (ContextTimeoutEnabled) and has no
// ReadTimeout of its own.
func TestOpTimeoutBehindLoneEnqueue(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	opt := *srv.Client().Options()
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1 // Options() holds it normalized: 0, which NewClient reads as 3
	opt.ReadTimeout = -1
	rdb := redis.NewClient(&opt)
	t.Cleanup(func() { _ = rdb.Close() })
	q, err := redisq.Open(ctx, rdb, "behind", &redisq.Options{OpTimeout: 200 * time.Millisecond,
		ManualRequeue: true, AckTimeout: time.Hour, TrustServer: true})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("a"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)

	admin := srv.Client()
	require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", 20000, "WRITE").Err())
	t.Cleanup(func() { _ = admin.Do(ctx, "CLIENT", "UNPAUSE").Err() })
	enqueued := make(chan error, 1)
	go func() {
		_, err := q.Enqueue(ctx, []byte("b"))
		enqueued <- err
	}()
	require.Eventually(t, func() bool {
		info, err := admin.Info(ctx, "clients").Result()
		return err == nil && strings.Contains(info, "blocked_clients:1\r")
	}, 5*time.Second, 10*time.Millisecond, "the Enqueue's call waits on the paused server")

	start := time.Now()
	err = m.Ack()
	require.Less(t, time.Since(start), 5*time.Second, "the Ack waited for the Enqueue's call")
	require.ErrorIs(t, err, context.DeadlineExceeded, "the Ack's own call, held by the pause")
	start = time.Now()
	_, err = q.TryDequeue()
	require.Less(t, time.Since(start), 5*time.Second, "the TryDequeue waited for the Enqueue's call")
	require.ErrorIs(t, err, context.DeadlineExceeded)

	require.NoError(t, admin.Do(ctx, "CLIENT", "UNPAUSE").Err())
	select {
	case err := <-enqueued:
		t.Logf("the lone Enqueue: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the lone Enqueue did not return once the pause ended")
	}
}
