package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestCloseDarkAddress: Close returns within OpTimeout when the queue's
// address went dark and the subscription's redial hangs (a client's
// Dialer that waits on its context alone: go-redis dials a subscription
// again under no deadline, holding the lock its PubSub's Close takes),
// with an error that says the subscription closes once that dial ends;
// the handle is closed all the same.
func TestCloseDarkAddress(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	d := &darkAddr{gone: make(chan struct{})}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, Dialer: d.dial})
	t.Cleanup(func() { _ = rdb.Close() })
	t.Cleanup(func() { close(d.gone) }) // first: ends the held dial
	q, err := redisq.Open(ctx, rdb, "close-dark", &redisq.Options{ManualRequeue: true, OpTimeout: time.Second})
	require.NoError(t, err)
	d.goDark()
	require.Eventually(t, func() bool { return d.darkDials() > 0 }, 10*time.Second, 10*time.Millisecond,
		"the subscription dials again")
	closed := make(chan error, 1)
	start := time.Now()
	go func() { closed <- q.Close() }()
	select {
	case err = <-closed:
	case <-time.After(15 * time.Second):
		t.Fatal("Close still waits for the subscription's dial after 15s (OpTimeout 1s)")
	}
	t.Logf("Close returned after %v: %v", time.Since(start).Round(time.Millisecond), err)
	require.ErrorContains(t, err, "redisq: close subscription")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = q.Enqueue(ctx, []byte("x"))
	require.ErrorIs(t, err, queue.ErrClosed)
}
