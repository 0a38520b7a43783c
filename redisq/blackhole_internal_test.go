package redisq

import (
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq/internal/redistest"
)

// blackhole is a client's network whose address, once dark, first
// refuses refuse dials at once (a primary that died) and then drops what
// is sent to it: a dial waits until its context ends, as a connect to an
// address that answers no SYN waits out the dial's timeout, and fails
// then with the dial's error. A dial also ends when the test does (gone),
// so that none outlives it.
type blackhole struct {
	dark   atomic.Bool
	refuse atomic.Int32 // dials still to refuse at once while dark
	dials  atomic.Int32 // dials made while dark
	gone   chan struct{}
}

func (b *blackhole) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if !b.dark.Load() {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	b.dials.Add(1)
	if b.refuse.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	select {
	case <-ctx.Done():
		return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
	case <-b.gone:
		return nil, &net.OpError{Op: "dial", Net: network, Err: net.ErrClosed}
	}
}

// sendLog is a client hook that records, for each send of the commands
// it picks, when it returned, its error and the deadline of the context
// it was sent under (zero: none).
type sendLog struct {
	redistest.Hook
	pick  func(redis.Cmder) bool
	mu    sync.Mutex
	sends []sent
}

type sent struct {
	end, deadline time.Time
	err           error
}

func (l *sendLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if l.pick(cmd) {
			d, _ := ctx.Deadline()
			l.mu.Lock()
			l.sends = append(l.sends, sent{end: time.Now(), deadline: d, err: err})
			l.mu.Unlock()
		}
		return err
	}
}

func (l *sendLog) take() []sent {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.sends
	l.sends = nil
	return out
}

// blackholeClient returns a client of srv whose every command dials
// (ConnMaxIdleTime 1ns) through b, one dial per send (DialerRetries 1)
// that a dark address holds for dialTimeout, with l's hook.
func blackholeClient(t *testing.T, srv *redistest.Server, b *blackhole, l *sendLog, dialTimeout time.Duration) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, Dialer: b.dial, DialerRetries: 1,
		DialTimeout: dialTimeout, ConnMaxIdleTime: time.Nanosecond})
	t.Cleanup(func() { close(b.gone); _ = rdb.Close() })
	rdb.AddHook(l)
	return rdb
}

// checkBound checks the sends l logged for a command with no deadline
// whose first send failed to dial and whose sends after it met a dark
// address: each send after the first ran under a context that ends
// OpTimeout (op) after the first failed, the last one was ended there,
// and the command returned (at returned) soon after, not a whole dial
// (hole) later.
func checkBound(t *testing.T, sends []sent, op, hole time.Duration, returned time.Time) {
	t.Helper()
	require.GreaterOrEqual(t, len(sends), 2, "sent again after the first send failed: %v", sends)
	require.True(t, unsent(sends[0].err), "the first send failed to dial: %v", sends[0].err)
	require.True(t, sends[0].deadline.IsZero(), "the first send runs under the caller's context, with no deadline")
	for i, s := range sends[1:] {
		require.False(t, s.deadline.IsZero(), "send %d after the first has a deadline", i+1)
		// The bound is taken just after the first send returned: a
		// second's slack for a loaded machine, against a dial of 10s.
		require.WithinRange(t, s.deadline, sends[0].end.Add(op), sends[0].end.Add(op+time.Second),
			"send %d after the first ends OpTimeout after the first failed", i+1)
	}
	require.ErrorIs(t, sends[len(sends)-1].err, context.DeadlineExceeded, "the bound ended the last send")
	require.Less(t, returned.Sub(sends[0].end), hole/2,
		"returned at the bound (%v after the first failure), not after a dial of the dark address (%v)", op, hole)
}

// TestBlackholeCallBound: a call whose context has no deadline, whose
// first send could not dial (a primary that died) and whose sends after
// it meet an address that drops everything (each dial waits out
// DialTimeout, here 10s), returns OpTimeout after the first failure, as
// Options.OpTimeout says, with the first send's dial error and the last
// send's: the sends after the first wait for a connection under a
// context that ends there. Without that bound a send after the first
// waits out its whole dial. Open's commands (rideAgain) are bound so too.
func TestBlackholeCallBound(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	const op, hole = 500 * time.Millisecond, 10 * time.Second
	t.Run("call", func(t *testing.T) {
		b := &blackhole{gone: make(chan struct{})}
		l := &sendLog{pick: func(c redis.Cmder) bool { return fcallOf(c, "enqueue1") }}
		rdb := blackholeClient(t, srv, b, l, hole)
		q, err := Open(ctx, rdb, "blackhole", &Options{ManualRequeue: true, AckTimeout: time.Hour, OpTimeout: op})
		require.NoError(t, err)
		defer q.Close()
		firstPass(t, q.handle)
		l.take()
		b.refuse.Store(1)
		b.dark.Store(true)
		_, err = q.Enqueue(ctx, []byte("x"))
		returned := time.Now()
		sends := l.take()
		t.Logf("Enqueue with no deadline: %d sends, %d dials, OpTimeout %v: %v", len(sends), b.dials.Load(), op, err)
		require.ErrorContains(t, err, "sent again within 500ms, Options.OpTimeout, after the first send failed: dial tcp")
		checkBound(t, sends, op, hole, returned)
	})
	t.Run("open", func(t *testing.T) {
		b := &blackhole{gone: make(chan struct{})}
		l := &sendLog{pick: func(c redis.Cmder) bool { return c.Name() == "config" }}
		rdb := blackholeClient(t, srv, b, l, hole)
		b.refuse.Store(1)
		b.dark.Store(true)
		_, err := Open(ctx, rdb, "blackhole-open", &Options{OpTimeout: op})
		returned := time.Now()
		sends := l.take()
		t.Logf("Open with no deadline: %d sends, %d dials, OpTimeout %v: %v", len(sends), b.dials.Load(), op, err)
		require.ErrorContains(t, err, "sent again within 500ms, Options.OpTimeout, while no connection could be made")
		checkBound(t, sends, op, hole, returned)
	})
}
