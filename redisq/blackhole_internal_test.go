package redisq

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq/internal/redistest"
)

// blackhole is a client's network whose address, once dark, drops what
// is sent to it: a dial waits until its context ends, as a connect to an
// address that answers no SYN waits out the dial's timeout, and fails
// then with the dial's error.
type blackhole struct {
	dark  atomic.Bool
	dials atomic.Int32 // dials made while dark
}

func (b *blackhole) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if !b.dark.Load() {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	b.dials.Add(1)
	<-ctx.Done()
	return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
}

// blackholeCall opens a queue on a client of srv whose dials follow
// copts (DialTimeout, DialerRetries, DialerRetryTimeout), makes its
// address dark, and runs one Enqueue with no deadline. It returns the
// Enqueue's error, how long it took, and the error of each send.
func blackholeCall(t *testing.T, srv *redistest.Server, copts redis.Options, op time.Duration) (error, time.Duration, []error) {
	t.Helper()
	ctx := context.Background()
	b := &blackhole{}
	copts.Addr, copts.MaxRetries, copts.Dialer = srv.Addr, -1, b.dial
	copts.ConnMaxIdleTime = time.Nanosecond // every call dials
	rdb := redis.NewClient(&copts)
	t.Cleanup(func() { _ = rdb.Close() })
	log := &fcallLog{op: "enqueue1"}
	rdb.AddHook(log)
	q, err := Open(ctx, rdb, "blackhole", &Options{ManualRequeue: true, AckTimeout: time.Hour, OpTimeout: op})
	require.NoError(t, err)
	defer q.Close()
	firstPass(t, q.handle)
	log.sends()
	b.dark.Store(true)
	start := time.Now()
	_, err = q.Enqueue(ctx, []byte("x"))
	took := time.Since(start)
	sends := log.sends()
	t.Logf("blackholed Enqueue with no deadline: %v, %d sends, %d dials, OpTimeout %v: %v", took, len(sends), b.dials.Load(), op, err)
	return err, took, sends
}

// TestBlackholeCallBound: a call whose context has no deadline, sent to
// an address that drops everything (a dial waits out DialTimeout, and
// go-redis dials DialerRetries times per send), fails after at most one
// send and OpTimeout, as Options.OpTimeout says, with the first send's
// dial error and the last send's: the sends after the first wait for a
// connection under a context that ends OpTimeout after the first failed.
// Without that bound a second whole send (DialerRetries dials of
// DialTimeout) starts within OpTimeout and runs past it.
func TestBlackholeCallBound(t *testing.T) {
	srv := redistest.Start(t)
	// One send: 3 dials of 1s and 2 pauses of 100ms, 3.2s.
	copts := redis.Options{DialTimeout: time.Second, DialerRetries: 3, DialerRetryTimeout: 100 * time.Millisecond}
	const op = 500 * time.Millisecond
	err, took, sends := blackholeCall(t, srv, copts, op)
	require.ErrorContains(t, err, "sent again within 500ms, Options.OpTimeout, after the first send failed: dial tcp")
	require.GreaterOrEqual(t, len(sends), 2, "sent again after the first send failed: %v", sends)
	require.True(t, unsent(sends[0]), "the first send failed to dial: %v", sends[0])
	require.ErrorIs(t, sends[len(sends)-1], context.DeadlineExceeded, "the bound ended the last send")
	send := 3*time.Second + 200*time.Millisecond
	require.Less(t, took, send+op+time.Second, "at most one send (%v) and OpTimeout (%v), with a second's slack", send, op)
}
