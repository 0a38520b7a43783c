package redisq_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// gatedDials is a client's network whose dials can be held: while
// held, a dial waits until the gate opens or its context ends, and
// counts itself.
type gatedDials struct {
	mu   sync.Mutex
	open chan struct{} // closed while dials pass
	held int           // dials that found the gate shut
	shut bool
}

func newGatedDials() *gatedDials {
	g := &gatedDials{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gatedDials) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	g.mu.Lock()
	open := g.open
	if g.shut {
		g.held++
	}
	g.mu.Unlock()
	select {
	case <-open:
	case <-ctx.Done():
		return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// hold shuts the gate: dials after it wait.
func (g *gatedDials) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shut, g.open = true, make(chan struct{})
}

// release opens the gate.
func (g *gatedDials) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut {
		g.shut = false
		close(g.open)
	}
}

func (g *gatedDials) heldDials() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

// TestResubscribeDeliversMissed: the handle's subscription drops (its
// connection killed, as by a server restart or a failover) and the
// messages enqueued before it subscribes again announce themselves to
// no one (pub/sub is at most once). Once the handle is subscribed again,
// a Dequeue blocked on the empty queue all the while looks again, each
// that leases waking the next, and every one gets a message
// (TestResubscribeWakesOne bounds the looks).
func TestResubscribeDeliversMissed(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	g := newGatedDials()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, Dialer: g.dial})
	t.Cleanup(func() { _ = rdb.Close() })
	t.Cleanup(g.release) // first: ends any dial still held
	q, err := redisq.Open(ctx, rdb, "resubscribe", &redisq.Options{ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	producer, err := redisq.Open(ctx, srv.Client(), "resubscribe", nil)
	require.NoError(t, err)
	defer producer.Close()

	const waiters = 3
	got := make(chan error, waiters)
	wait, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for range waiters {
		go func() {
			m, err := q.Dequeue(wait)
			if err == nil {
				err = m.Ack()
			}
			got <- err
		}()
	}
	require.Eventually(t, func() bool { return redisq.QueueWaiting(q) == waiters }, 30*time.Second, time.Millisecond,
		"each Dequeue looks, finds none, and waits")

	g.hold()
	n, err := srv.Client().ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
	require.NoError(t, err)
	require.Positive(t, n, "the subscriptions' connections killed")
	require.Eventually(t, func() bool { return g.heldDials() > 0 }, 10*time.Second, 5*time.Millisecond,
		"the subscription dials again")
	for range waiters { // announced to no subscriber of the consumer's handle
		_, err = producer.Enqueue(ctx, []byte("x"))
		require.NoError(t, err)
	}
	g.release()
	for i := range waiters {
		select {
		case err := <-got:
			require.NoError(t, err, "waiter %d", i)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d blocked Dequeues still wait 10s after the subscription could dial again", waiters-i, waiters)
		}
	}
}

// TestListenPausesOnDialTimeouts: while the subscription's server is
// unreachable and every dial fails at once with a timeout (a Dialer with
// a short timeout of its own), the handle dials again after a pause that
// grows, not in a loop.
func TestListenPausesOnDialTimeouts(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	d := &darkAddr{gone: make(chan struct{}), hold: time.Millisecond}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, Dialer: d.dial})
	t.Cleanup(func() { _ = rdb.Close() })
	t.Cleanup(func() { close(d.gone) })
	q, err := redisq.Open(ctx, rdb, "dial-timeouts", &redisq.Options{ReadOnly: true}) // no housekeeper: the dials are the subscription's
	require.NoError(t, err)
	defer q.Close()

	d.goDark()
	require.Eventually(t, func() bool { return d.darkDials() > 0 }, 10*time.Second, time.Millisecond,
		"the subscription dials again")
	from := d.darkDials()
	const span = 2 * time.Second
	time.Sleep(span)
	n := d.darkDials() - from
	t.Logf("%d dials in %v", n, span)
	// Pauses of 5ms doubling to 200ms: about 15 dials in 2s. A loop
	// without pause dials hundreds of times.
	require.Less(t, n, 40, "dials again after a pause")
}
