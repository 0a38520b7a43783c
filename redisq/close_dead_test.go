package redisq_test

import (
	"context"
	"runtime"
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
	c := closeInTheDark(t, "close-dead", false, 30*time.Second)
	require.NoError(t, c.err)
	require.Less(t, c.took, 2*time.Second, "Close ends the subscription's dial")
	if left := newGoroutines(c.before, 5*time.Second, redisqPkg, goRedisPkg); left != "" {
		t.Fatalf("goroutines of the handle or its subscription still running 5s after Close:\n%s", left)
	}
	_, err := c.q.Enqueue(context.Background(), []byte("x"))
	require.ErrorIs(t, err, queue.ErrClosed)
}

// TestCloseDeafDialer: as TestCloseDeadServer, with a client's Dialer
// that ignores its context, so that nothing ends the subscription's
// redial: Close returns within OpTimeout all the same, with an error
// saying the subscription closes once that dial ends, the handle is
// closed, and once the dial ends no goroutine of the handle or of its
// subscription is left.
func TestCloseDeafDialer(t *testing.T) {
	const opTimeout = time.Second
	c := closeInTheDark(t, "close-deaf", true, opTimeout)
	t.Logf("Close returned after %v: %v", c.took.Round(time.Millisecond), c.err)
	require.ErrorContains(t, c.err, "redisq: close subscription")
	require.ErrorIs(t, c.err, context.DeadlineExceeded)
	require.Less(t, c.took, opTimeout+2*time.Second, "Close returns within OpTimeout")
	_, err := c.q.Enqueue(context.Background(), []byte("x"))
	require.ErrorIs(t, err, queue.ErrClosed)

	c.endDials() // the dial ends: the subscription's close goes on
	if left := newGoroutines(c.before, 5*time.Second, redisqPkg, goRedisPkg); left != "" {
		t.Fatalf("goroutines of the handle or its subscription still running 5s after its dial ended:\n%s", left)
	}
}

// darkClose is what closeInTheDark saw.
type darkClose struct {
	q        *redisq.Queue
	err      error         // Close's
	took     time.Duration // Close's
	before   map[string]leakcheck.Goroutine
	endDials func() // ends every dial to the dark address still held
}

// closeInTheDark opens a queue named name with opTimeout on a server of
// its own, through a client whose dials go to a darkAddr (deaf: one that
// ignores their context), kills the server and takes its address away,
// waits for the subscription itself to dial again, and closes the queue. It
// fails the test when Close has not returned after 15s; before holds the
// goroutines of redisq and go-redis running before Open.
func closeInTheDark(t *testing.T, name string, deaf bool, opTimeout time.Duration) darkClose {
	t.Helper()
	ctx := context.Background()
	srv := redistest.Start(t)
	d := &darkAddr{gone: make(chan struct{}), deaf: deaf}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, Dialer: d.dial})
	t.Cleanup(func() { _ = rdb.Close() })
	c := darkClose{endDials: sync.OnceFunc(func() { close(d.gone) })}
	t.Cleanup(c.endDials) // first: ends any dial still held
	require.NoError(t, rdb.Ping(ctx).Err())
	c.before = goroutinesOf(redisqPkg, goRedisPkg)
	var err error
	c.q, err = redisq.Open(ctx, rdb, name, &redisq.Options{ManualRequeue: true, OpTimeout: opTimeout})
	require.NoError(t, err)

	srv.Kill()
	d.goDark()
	// The subscription's own dial: the housekeeper's calls dial on the
	// pool's goroutines, which Close does not wait for.
	require.Eventually(t, func() bool { return d.subscriptionDials() > 0 }, 10*time.Second, 10*time.Millisecond,
		"the subscription dials again")
	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- c.q.Close() }()
	select {
	case c.err = <-closed:
	case <-time.After(15 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("Close still waits after 15s (OpTimeout %v):\n%s", opTimeout, buf[:runtime.Stack(buf, true)])
	}
	c.took = time.Since(start)
	return c
}

// redisqPkg and goRedisPkg name the packages whose goroutines the Close
// tests look for.
const (
	redisqPkg  = "github.com/walq/walq/redisq"
	goRedisPkg = "github.com/redis/go-redis/v9"
)
