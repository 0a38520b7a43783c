package redisq_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// darkProxy forwards TCP connections to a server. goDark silences every
// connection made so far, both ways, without closing either socket: what
// either side sends is read and dropped, as by a host that vanished
// without a reset, a NAT or firewall that forgot the flow, or a VIP moved
// elsewhere. The connections accepted after that are forwarded again.
// While muted, it forwards what clients send and drops what the server
// answers, on every connection: a server whose replies come late.
type darkProxy struct {
	ln     net.Listener
	target string
	muted  atomic.Bool
	mu     sync.Mutex
	epoch  int        // goDark's count; a connection of an earlier epoch is dark
	conns  []net.Conn // every socket of the proxy, closed by stop
	closed bool
	wg     sync.WaitGroup // the accept loop and the copies
}

// startDarkProxy starts a proxy to target on a loopback port, stopped
// when the test ends.
func startDarkProxy(t *testing.T, target string) *darkProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &darkProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.stop)
	return p
}

func (p *darkProxy) addr() string { return p.ln.Addr().String() }

func (p *darkProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_, _ = c.Close(), s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		epoch := p.epoch
		p.wg.Add(2)
		p.mu.Unlock()
		go p.copy(s, c, epoch, nil)
		go p.copy(c, s, epoch, &p.muted)
	}
}

// copy forwards from src to dst while the connection's epoch is the
// current one and mute (nil: never) is unset; else it reads and drops.
func (p *darkProxy) copy(dst, src net.Conn, epoch int, mute *atomic.Bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.isDark(epoch) && (mute == nil || !mute.Load()) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *darkProxy) isDark(epoch int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return epoch < p.epoch
}

// goDark silences every connection made so far.
func (p *darkProxy) goDark() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.epoch++
}

// stop closes the listener and every socket, and waits for the copies.
func (p *darkProxy) stop() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestSilentSubscriptionRedialed: the connections of a consumer's handle
// go silent (darkProxy: nothing is answered, nothing is reset, so its
// subscription's receive sees no error for as long as the kernel keeps
// retransmitting, minutes) while a Dequeue is blocked on it, and a
// producer on a handle of its own enqueues. The subscription's PING goes
// unanswered, so within subscriptionCheck of quiet and as long again for
// the Pong the handle drops that connection (and logs it) and subscribes
// again, which wakes the Dequeue: the consumer, calling again after the
// error of a call that drew a silent connection of its pool (each costs
// the client's ReadTimeout), gets the message. Meanwhile a handle of a
// healthy server, whose channel carries nothing, pings and gets its Pong
// and keeps its connection.
func TestSilentSubscriptionRedialed(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	p := startDarkProxy(t, srv.Addr)
	const readTimeout = time.Second
	rdb := redis.NewClient(&redis.Options{Addr: p.addr(), MaxRetries: -1, ReadTimeout: readTimeout})
	t.Cleanup(func() { _ = rdb.Close() })
	producer, err := redisq.Open(ctx, srv.Client(), "silent", nil)
	require.NoError(t, err)
	defer producer.Close()
	var idleLogs, logs syncBuffer
	idleClient := srv.Client()
	idle, err := redisq.Open(ctx, idleClient, "idle", &redisq.Options{Logger: slog.New(slog.NewJSONHandler(&idleLogs, nil))})
	require.NoError(t, err)
	defer idle.Close()
	idleSince := time.Now()
	before := goroutinesOf(redisqPkg, goRedisPkg)
	q, err := redisq.Open(ctx, rdb, "silent", &redisq.Options{ManualRequeue: true,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	require.NoError(t, err)
	closeQ := sync.OnceValue(q.Close)
	defer closeQ()

	wait, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	got := make(chan string, 1)
	var errs []error // the consumer's failed calls, read after got
	go func() {
		defer close(got)
		for {
			m, err := q.Dequeue(wait)
			if err == nil {
				got <- string(m.Payload)
				return
			}
			errs = append(errs, err)
			if wait.Err() != nil {
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond) // the Dequeue looks, finds none, and waits

	// Checks are 3s apart (subscriptionCheck): the PING at most 3s after
	// the connections go silent, its Pong awaited 3s; then the consumer's
	// calls may draw each silent connection of the pool, at ReadTimeout
	// each, and the rest is slack for a loaded machine.
	silentConns := rdb.PoolStats().TotalConns
	bound := 3*time.Second + 3*time.Second + time.Duration(silentConns)*readTimeout + 2*time.Second
	p.goDark()
	dark := time.Now()
	_, err = producer.Enqueue(ctx, []byte("after the dark"))
	require.NoError(t, err)
	payload, ok := <-got
	took := time.Since(dark)
	t.Logf("the blocked consumer's calls failed %d times (%v), %d connections of its pool silent; "+
		"it got %q %v after its connections went silent", len(errs), errs, silentConns, payload, took.Round(time.Millisecond))
	require.True(t, ok, "the consumer blocked in Dequeue got nothing within %v of its connections going silent "+
		"(its calls failed %d times: %v)", took.Round(time.Millisecond), len(errs), errors.Join(errs...))
	require.Equal(t, "after the dark", payload)
	require.Less(t, took, bound, "the message reached the blocked consumer within the bound")
	require.True(t, logs.has("redisq: wake-up subscription silent: PING unanswered; connecting again"),
		"the dropped subscription is logged")

	// The silent connection was closed, not left beside the new one, and
	// Close leaves no goroutine of the handle or of its subscription.
	ps := rdb.PoolStats().PubSubStats
	require.Equal(t, uint32(2), ps.Created, "the subscription dialled again once")
	require.Equal(t, uint32(1), ps.Active, "the silent subscription connection closed")
	require.NoError(t, closeQ())
	if left := newGoroutines(before, 5*time.Second, redisqPkg, goRedisPkg); left != "" {
		t.Fatalf("goroutines of the handle or its subscription still running 5s after Close:\n%s", left)
	}

	// The idle handle's PING, past subscriptionCheck of quiet, was
	// answered within subscriptionCheck more: it kept its connection.
	time.Sleep(time.Until(idleSince.Add(3*time.Second + 3*time.Second + time.Second)))
	require.Equal(t, uint32(1), idleClient.PoolStats().PubSubStats.Created, "a healthy idle subscription is not dialled again")
	require.False(t, idleLogs.has("redisq: wake-up subscription silent: PING unanswered; connecting again"))
}
