package redisq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestUnsent: only an error that proves the call was never written
// counts as unsent: a dial's error (refused, no route, the dial's
// timeout), the pool's timeout, or a failed setup of a new connection (a
// read's timeout or a system call's error that go-redis returns without
// its *net.OpError, setupFailed), however wrapped. An error of the
// call's own read or write (reset, EOF, broken pipe, a read's timeout,
// which keep their *net.OpError, also under the context's error that
// timedOut puts on them), the pool's other errors and an ended context
// are not.
func TestUnsent(t *testing.T) {
	dial := func(err error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", err)}
	}
	conn := func(op string, err error) error {
		return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, err)}
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"dial refused", dial(syscall.ECONNREFUSED), true},
		{"dial no route", dial(syscall.EHOSTUNREACH), true},
		{"dial timeout", &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}, true},
		{"dial wrapped", fmt.Errorf("redisq: enqueue: %w", dial(syscall.ECONNREFUSED)), true},
		{"pool timeout", redis.ErrPoolTimeout, true},
		{"pool timeout wrapped", fmt.Errorf("redisq: ack: %w", redis.ErrPoolTimeout), true},
		{"setup timeout", os.ErrDeadlineExceeded, true},
		{"setup reset", os.NewSyscallError("read", syscall.ECONNRESET), true},
		{"setup broken pipe", fmt.Errorf("redisq: enqueue: %w", os.NewSyscallError("write", syscall.EPIPE)), true},
		{"setup timeout, ride ended", fmt.Errorf("%w (the call did not run: %w)", context.Canceled,
			fmt.Errorf("redisq: publish: %w", os.ErrDeadlineExceeded)), true},
		{"read reset", conn("read", syscall.ECONNRESET), false},
		{"write broken pipe", conn("write", syscall.EPIPE), false},
		{"read timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, false},
		{"read timeout, context ended", fmt.Errorf("%w (%w)", context.DeadlineExceeded,
			&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}), false},
		{"read timeout, ride ended", fmt.Errorf("%w (ended while sending again what failed with: %v)",
			&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, os.ErrDeadlineExceeded), false},
		{"EOF", io.EOF, false},
		{"unexpected EOF", fmt.Errorf("redisq: enqueue: %w", io.ErrUnexpectedEOF), false},
		{"pool exhausted", redis.ErrPoolExhausted, false},
		{"client closed", redis.ErrClosed, false},
		{"context", context.DeadlineExceeded, false},
		{"reply naming a dial", reply("ERR dial tcp 127.0.0.1:1: connect: connection refused"), false},
		{"text of a dial", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), false},
		{"nil", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, unsent(c.err), "%v", c.err)
		})
	}
}

// TestReadTimedOut: a call whose client stopped waiting for its reply
// once its context ended holds a connection's timeout (a read's, a
// setup's) and the context's error; the context's DeadlineExceeded
// alone, which go-redis returns for a wait that ended before anything
// was written, is a net.Error that timed out too, and is not one.
func TestReadTimedOut(t *testing.T) {
	read := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"read timeout, deadline", fmt.Errorf("%w (%w)", context.DeadlineExceeded, read), true},
		{"read timeout, cancel", fmt.Errorf("redisq: publish: %w", fmt.Errorf("%w (%w)", context.Canceled, read)), true},
		{"setup timeout, deadline", fmt.Errorf("%w (%w)", context.DeadlineExceeded, os.ErrDeadlineExceeded), true},
		{"read timeout, context alive", read, false},
		{"deadline alone", context.DeadlineExceeded, false},
		{"deadline wrapped", fmt.Errorf("redisq: enqueue: %w", context.DeadlineExceeded), false},
		{"cancel alone", context.Canceled, false},
		{"reset, deadline", fmt.Errorf("%w (%w)", context.DeadlineExceeded,
			&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, readTimedOut(c.err), "%v", c.err)
		})
	}
}

// TestUnrunResending: on a client that sends a command again itself
// (resends) an unsent failure, a dial's error, the pool's timeout or a
// failed setup, is that of the client's last send only, which may follow
// a send that was written and ran: it does not prove the call did not
// run. A refusal still does (the doc of Options.AcceptDoubleRuns says
// what that costs).
func TestUnrunResending(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		name             string
		err              error
		alone, resending bool // unrun on a client that sends once, on one that sends again
	}{
		{"dial", dial, true, false},
		{"pool timeout", redis.ErrPoolTimeout, true, false},
		{"setup timeout", os.ErrDeadlineExceeded, true, false},
		{"setup reset", os.NewSyscallError("read", syscall.ECONNRESET), true, false},
		{"refusal", reply("MOVED 3999 127.0.0.1:7001"), true, true},
		{"read timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.alone, (&handle{}).unrun(c.err), "a client that sends once: %v", c.err)
			require.Equal(t, c.resending, (&handle{resends: true}).unrun(c.err), "a client that sends again: %v", c.err)
		})
	}
}

// firstPass waits until the housekeeper of h ended its first pass (it
// then sleeps: AckTimeout an hour), so that no call of its draws a
// failure a test injects for the call it makes.
func firstPass(t *testing.T, h *handle) {
	t.Helper()
	require.Eventually(t, func() bool { return h.armed.Load() != unarmed }, 10*time.Second, time.Millisecond,
		"the housekeeper's first pass ended")
}

// faultNet is a client's network that fails on demand: the next dials
// made while a watched FCALL is under way (failDials of them, with
// dialErr) before any byte goes out, or the next FCALL written (failAfter,
// with its error) after the server ran it: the reply is read and
// dropped, and the failure returned instead.
type faultNet struct {
	watching  atomic.Bool  // a watched FCALL is under way (fcallLog)
	failDials atomic.Int32 // dials still to fail while watching
	dialErr   error        // what they fail with
	mu        sync.Mutex
	failAfter error // the next FCALL written fails so, once it ran; nil: none
}

func (f *faultNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if f.watching.Load() && f.failDials.Add(-1) >= 0 {
		return nil, f.dialErr
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &faultConn{Conn: c, f: f}, nil
}

// take returns the failure for an FCALL written now, once.
func (f *faultNet) take() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.failAfter
	f.failAfter = nil
	return err
}

// faultConn is a connection of a faultNet.
type faultConn struct {
	net.Conn
	f    *faultNet
	fail error // the failure of the FCALL written last, returned by the read of its reply
}

func (c *faultConn) Write(p []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(p), []byte("fcall")) {
		c.fail = c.f.take()
	}
	n, err := c.Conn.Write(p)
	var oe *net.OpError
	if err == nil && errors.As(c.fail, &oe) && oe.Op == "write" { // the bytes went out, then the write failed
		return n, c.fail
	}
	return n, err
}

func (c *faultConn) Read(p []byte) (int, error) {
	if c.fail == nil {
		return c.Conn.Read(p)
	}
	// The reply is read (so the call ran), then thrown away.
	_ = c.Conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, _ = c.Conn.Read(make([]byte, 1<<16))
	_ = c.Conn.Close()
	return 0, c.fail
}

// fcallOf reports whether cmd is an FCALL of the library function op.
func fcallOf(cmd redis.Cmder, op string) bool {
	fn, _, ok := fcallFunc(cmd)
	return ok && strings.HasSuffix(fn, "_"+op)
}

// fcallFunc returns the name of the library function cmd calls, with the
// command's arguments, and whether cmd is an FCALL at all.
func fcallFunc(cmd redis.Cmder) (fn string, args []any, ok bool) {
	args = cmd.Args()
	if cmd.Name() != "fcall" || len(args) < 2 {
		return "", args, false
	}
	return fmt.Sprint(args[1]), args, true
}

// fcallLog is a client hook that records the outcome of every FCALL of
// the library function op sent by the client (a failed dial included),
// and marks f watching while one is under way.
type fcallLog struct {
	redistest.Hook
	op   string
	f    *faultNet // nil: none to mark
	mu   sync.Mutex
	errs []error
}

func (l *fcallLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !fcallOf(cmd, l.op) {
			return next(ctx, cmd)
		}
		if l.f != nil {
			l.f.watching.Store(true)
			defer l.f.watching.Store(false)
		}
		err := next(ctx, cmd)
		l.mu.Lock()
		l.errs = append(l.errs, err)
		l.mu.Unlock()
		return err
	}
}

// sends returns the outcomes recorded since the last call, and forgets them.
func (l *fcallLog) sends() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.errs
	l.errs = nil
	return out
}

// TestUnsentSentAgain injects each kind of failure into a real client's
// network, at the point of dialing (nothing written) and after the
// server ran the call (its reply lost), under an Enqueue WithID and an
// Ack. A call that failed to dial is sent again until one connects and
// returns nil, having run once (the message enqueued once, the ack
// holding). One whose connection failed after the write is sent once:
// its error is returned (neither ErrDuplicate nor ErrLeaseLost, which a
// second run would have answered), and the server ran it once.
func TestUnsentSentAgain(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	refusedDial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		name  string
		dials int   // dials that fail, with err
		after error // else the failure after the call ran
	}{
		{"dial refused", 3, refusedDial},
		{"dial no route", 2, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}},
		{"dial timeout", 2, &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}},
		{"EOF after the write", 0, io.EOF},
		{"reset after the write", 0, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}},
		{"read timeout after the write", 0, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}},
		{"write failed after the bytes went out", 0, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &faultNet{dialErr: refusedDial}
			if c.dials > 0 {
				f.dialErr = c.after
			}
			// Every call dials (ConnMaxIdleTime 1ns: no connection is
			// reused), once (DialerRetries 1: a failed dial is the call's).
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialerRetries: 1,
				ConnMaxIdleTime: time.Nanosecond, Dialer: f.dial})
			t.Cleanup(func() { _ = rdb.Close() })
			enqs, acks := &fcallLog{op: "enqueue", f: f}, &fcallLog{op: "ack1", f: f}
			rdb.AddHook(enqs)
			rdb.AddHook(acks)
			name := "unsent-" + c.name
			// AckTimeout an hour: the housekeeper sleeps through the
			// test (no lease runs out before its next pass in 30s).
			q, err := Open(ctx, rdb, name, &Options{ManualRequeue: true, AckTimeout: time.Hour, OpTimeout: 5 * time.Second})
			require.NoError(t, err)
			defer q.Close()
			firstPass(t, q.handle)
			check, err := Open(ctx, srv.Client(), name, &Options{ReadOnly: true})
			require.NoError(t, err)
			defer check.Close()

			arm := func() {
				if c.dials > 0 {
					f.failDials.Store(int32(c.dials))
					return
				}
				f.mu.Lock()
				f.failAfter = c.after
				f.mu.Unlock()
			}
			outcome := func(what string, err error, sends []error, second error) {
				t.Helper()
				if c.dials > 0 {
					require.NoError(t, err, "%s: a call that was never written is sent again", what)
					require.Len(t, sends, c.dials+1, "%s: sent until a dial succeeded: %v", what, sends)
					for _, e := range sends[:c.dials] {
						require.True(t, unsent(e), "%s: %v", what, e)
					}
					require.NoError(t, sends[c.dials], what)
					return
				}
				require.Error(t, err, "%s: a call that may have run returns its error", what)
				require.NotErrorIs(t, err, second, "%s: sent again after the write", what)
				require.Len(t, sends, 1, "%s: sent once: %v", what, sends)
				require.False(t, unsent(err), "%s: %v", what, err)
			}

			arm()
			_, err = q.Enqueue(ctx, []byte("x"), queue.WithID("x"))
			outcome("enqueue", err, enqs.sends(), queue.ErrDuplicate)
			st, err := check.StatsContext(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(1), st.Ready, "the enqueue ran once")

			m, err := q.TryDequeue()
			require.NoError(t, err)
			acks.sends()
			arm()
			err = m.Ack()
			outcome("ack", err, acks.sends(), queue.ErrLeaseLost)
			st, err = check.StatsContext(ctx)
			require.NoError(t, err)
			require.Equal(t, [2]int64{0, 0}, [2]int64{st.Ready, st.InFlight}, "the ack ran")
			require.Equal(t, uint64(1), st.Acked, "the ack ran")
		})
	}
}

// TestPoolTimeoutSentAgain: a call that waited in vain for a connection
// of the client's pool (redis.ErrPoolTimeout: the pool's only connection
// held by a blocking command) was never written, and is sent again
// until the connection comes free: the Enqueue returns nil, run once.
func TestPoolTimeoutSentAgain(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, PoolSize: 1,
		PoolTimeout: 50 * time.Millisecond, ReadTimeout: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	enqs := &fcallLog{op: "enqueue"}
	rdb.AddHook(enqs)
	q, err := Open(ctx, rdb, "pooltimeout", &Options{ManualRequeue: true, AckTimeout: time.Hour, OpTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer q.Close()
	firstPass(t, q.handle)

	held := make(chan error, 1)
	go func() { held <- rdb.BLPop(ctx, 0, "pooltimeout-hold").Err() }()
	require.Eventually(t, func() bool {
		n, err := srv.Client().Do(ctx, "CLIENT", "LIST").Text()
		return err == nil && bytes.Contains([]byte(n), []byte("cmd=blpop"))
	}, 5*time.Second, time.Millisecond, "the pool's connection is held")
	// The connection comes free once the Enqueue's first send timed out
	// in the pool.
	go func() {
		for {
			enqs.mu.Lock()
			n := len(enqs.errs)
			enqs.mu.Unlock()
			if n > 0 {
				_ = srv.Client().RPush(ctx, "pooltimeout-hold", "free").Err()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	_, err = q.Enqueue(ctx, []byte("p"), queue.WithID("p"))
	require.NoError(t, err, "a call that found no connection is sent again")
	require.NoError(t, <-held)
	sends := enqs.sends()
	require.Greater(t, len(sends), 1, "the pool timed out first: %v", sends)
	for _, e := range sends[:len(sends)-1] {
		require.ErrorIs(t, e, redis.ErrPoolTimeout)
	}
	require.NoError(t, sends[len(sends)-1])
	st, err := q.StatsContext(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Ready, "the enqueue ran once")
}

// afterFirst is a client hook that runs f once, after the first FCALL of
// the library function op returned.
type afterFirst struct {
	redistest.Hook
	op   string
	once sync.Once
	f    func()
}

func (a *afterFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if fcallOf(cmd, a.op) {
			a.once.Do(a.f)
		}
		return err
	}
}

// TestResendingClientDialNotSentAgain: a client that sends a command
// again itself (MaxRetries above 0, opened with AcceptDoubleRuns)
// returns the error of its last send, so a dial's error proves nothing
// of the sends before it. Two Enqueues sent together: the client's first
// send runs them and loses the reply (EOF), its next two fail to dial.
// The handle does not send them again (the one still there gets the
// error, not ErrDuplicate), and the caller that left once that call
// returned is told its message may be enqueued (ErrMayHaveRun), not that
// nothing ran: both messages are enqueued, once.
func TestResendingClientDialNotSentAgain(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	f := &faultNet{dialErr: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	// One connection (PoolSize 1), which the first send uses; the
	// client's two sends after it each dial once (DialerRetries 1).
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: 2, MinRetryBackoff: time.Millisecond,
		MaxRetryBackoff: time.Millisecond, PoolSize: 1, DialerRetries: 1, Dialer: f.dial})
	t.Cleanup(func() { _ = rdb.Close() })
	left, leave := context.WithCancel(ctx)
	defer leave()
	enqs := &fcallLog{op: "enqueue", f: f}
	rdb.AddHook(enqs)
	rdb.AddHook(&afterFirst{op: "enqueue", f: leave})
	q, err := Open(ctx, rdb, "resending", &Options{AcceptDoubleRuns: true, ManualRequeue: true,
		AckTimeout: time.Hour, OpTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer q.Close()
	firstPass(t, q.handle)

	now := q.o.Clock.Now()
	var reqs []enqueueReq
	for i, c := range []context.Context{left, ctx} {
		it := queue.Item{ID: fmt.Sprint("r", i), Payload: []byte("r")}
		args, err := q.itemArgs(now, &it)
		require.NoError(t, err)
		reqs = append(reqs, enqueueReq{p: newPresence(c), now: now, args: args})
	}
	f.mu.Lock()
	f.failAfter = io.EOF
	f.mu.Unlock()
	f.failDials.Store(2)
	errs := q.enqueueEach(reqs)
	require.Error(t, errs[1], "the call's outcome is unknown")
	require.NotErrorIs(t, errs[1], queue.ErrDuplicate, "sent again after the client's send that ran")
	require.Len(t, enqs.sends(), 1, "the handle sent the call once")
	require.ErrorIs(t, leaveEnqueue(reqs[0], left.Err()), ErrMayHaveRun, "the caller that left")
	check, err := Open(ctx, srv.Client(), "resending", &Options{ReadOnly: true})
	require.NoError(t, err)
	defer check.Close()
	st, err := check.StatsContext(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), st.Ready, "both enqueued, once")
}
