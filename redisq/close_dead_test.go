package redisq_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/leakcheck"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestCloseDeadServer: the queue's server is killed (kill -9) and its
// address goes dark (every dial after hangs until its context ends), so
// the subscription's reconnection hangs in its dial. Close ends that
// dial: it returns at once, without error, and leaves no goroutine of
// the handle or of its subscription running, while the client it was
// given stays open.
func TestCloseDeadServer(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	d := &darkAddr{gone: make(chan struct{})}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, Dialer: d.dial})
	t.Cleanup(func() { _ = rdb.Close() })
	t.Cleanup(func() { close(d.gone) }) // first: ends any dial still held
	require.NoError(t, rdb.Ping(ctx).Err())
	before := clientGoroutines()
	q, err := redisq.Open(ctx, rdb, "close-dead", &redisq.Options{ManualRequeue: true, OpTimeout: 30 * time.Second})
	require.NoError(t, err)

	srv.Kill()
	d.goDark()
	require.Eventually(t, func() bool { return d.darkDials() > 0 }, 10*time.Second, 10*time.Millisecond,
		"the subscription dials again")
	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- q.Close() }()
	select {
	case err = <-closed:
	case <-time.After(15 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("Close still waits after 15s:\n%s", buf[:runtime.Stack(buf, true)])
	}
	require.NoError(t, err)
	require.Less(t, time.Since(start), 2*time.Second, "Close ends the subscription's dial")
	if left := newClientGoroutines(before, 5*time.Second); left != "" {
		t.Fatalf("goroutines of the handle or its subscription still running 5s after Close:\n%s", left)
	}
	_, err = q.Enqueue(ctx, []byte("x"))
	require.ErrorIs(t, err, queue.ErrClosed)
}

// TestCloseDeafDialer: as TestCloseDeadServer, with a client's Dialer
// that ignores its context, so that nothing ends the subscription's
// redial: Close returns within OpTimeout all the same, with an error
// saying the subscription closes once that dial ends, the handle is
// closed, and once the dial ends no goroutine of the handle or of its
// subscription is left.
func TestCloseDeafDialer(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	d := &darkAddr{gone: make(chan struct{}), deaf: true}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, Dialer: d.dial})
	t.Cleanup(func() { _ = rdb.Close() })
	ended := sync.OnceFunc(func() { close(d.gone) })
	t.Cleanup(ended) // first: ends any dial still held
	require.NoError(t, rdb.Ping(ctx).Err())
	before := clientGoroutines()
	const opTimeout = time.Second
	q, err := redisq.Open(ctx, rdb, "close-deaf", &redisq.Options{ManualRequeue: true, OpTimeout: opTimeout})
	require.NoError(t, err)

	srv.Kill()
	d.goDark()
	require.Eventually(t, func() bool { return d.darkDials() > 0 }, 10*time.Second, 10*time.Millisecond,
		"the subscription dials again")
	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- q.Close() }()
	select {
	case err = <-closed:
	case <-time.After(15 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("Close still waits after 15s (OpTimeout %v):\n%s", opTimeout, buf[:runtime.Stack(buf, true)])
	}
	took := time.Since(start)
	t.Logf("Close returned after %v: %v", took.Round(time.Millisecond), err)
	require.ErrorContains(t, err, "redisq: close subscription")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, took, opTimeout+2*time.Second, "Close returns within OpTimeout")
	_, err = q.Enqueue(ctx, []byte("x"))
	require.ErrorIs(t, err, queue.ErrClosed)

	ended() // the dial ends: the subscription's close goes on
	if left := newClientGoroutines(before, 5*time.Second); left != "" {
		t.Fatalf("goroutines of the handle or its subscription still running 5s after its dial ended:\n%s", left)
	}
}

// clientGoroutines returns the running goroutines of package redisq and
// of go-redis that are not the tests' own, by their stack's header.
func clientGoroutines() map[string]leakcheck.Goroutine {
	out := make(map[string]leakcheck.Goroutine)
	for _, g := range leakcheck.Running("github.com/walq/walq/redisq", "github.com/redis/go-redis/v9") {
		if !leakcheck.InTest(g) {
			id, _, _ := strings.Cut(g.Stack, " [")
			out[id] = g
		}
	}
	return out
}

// newClientGoroutines waits up to grace for the goroutines of
// clientGoroutines that were not in before to end, and returns the stacks
// of those still running, or "".
func newClientGoroutines(before map[string]leakcheck.Goroutine, grace time.Duration) string {
	for deadline := time.Now().Add(grace); ; time.Sleep(20 * time.Millisecond) {
		var b strings.Builder
		for id, g := range clientGoroutines() {
			if _, ok := before[id]; !ok {
				b.WriteString("--- " + g.Func + "\n" + g.Stack + "\n\n")
			}
		}
		if b.Len() == 0 || time.Now().After(deadline) {
			return b.String()
		}
	}
}
