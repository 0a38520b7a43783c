package redisq_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestSetupStallNotInFlight: a call that carries a change, sent alone
// under its caller's context, draws a new connection whose setup stalls
// (a proxy holds every reply, HELLO's first: the first command go-redis
// sends on a connection) until after the context ended. It returns its
// context's error, not ErrMayHaveRun: go-redis writes a call only on a
// connection whose setup succeeded, so this one never reached the server
// (the proxy heard HELLO and no FCALL), and nothing changed. Reported as
// may have run, a caller would send a Publish again for nothing, or
// count a message as maybe enqueued that was not.
func TestSetupStallNotInFlight(t *testing.T) {
	srv := redistest.Start(t)
	clients := []struct {
		name string
		opt  redis.Options
		end  error
	}{
		{"deadline, ContextTimeoutEnabled", redis.Options{ContextTimeoutEnabled: true}, context.DeadlineExceeded},
		{"cancel, ReadTimeout", redis.Options{}, context.Canceled},
	}
	n := 0
	for _, c := range changeCalls {
		for _, cl := range clients {
			n++
			t.Run(c.name+", "+cl.name, func(t *testing.T) {
				// An attempt whose call ended before it wrote HELLO (a
				// loaded machine ran nothing of it before its context
				// ended) proves nothing: it runs again with every
				// duration doubled. One that wrote the FCALL fails.
				for scale := time.Duration(1); !setupStallOnce(t, srv.Addr, c, cl.opt, cl.end, fmt.Sprint("setupstall-", n, "-", scale), scale); scale *= 2 {
					require.Less(t, scale, time.Duration(64), "no call wrote HELLO before its context ended")
				}
			})
		}
	}
}

// setupStallOnce runs one attempt of TestSetupStallNotInFlight with its
// durations times scale: the call, under a context that ends (end) after
// 200ms (a deadline) or 100ms (a cancel, read ended by a ReadTimeout of
// 1s), on a connection whose setup stalls. It returns false when the
// proxy heard nothing of the call, which then did not stall in setup.
func setupStallOnce(t *testing.T, addr string, c changeCall, opt redis.Options, end error, name string, scale time.Duration) bool {
	t.Helper()
	p := startDarkProxy(t, addr)
	opt.Addr = p.addr()
	opt.MaxRetries = -1
	if end == context.Canceled {
		// Open's reads run under it too: long enough for a loaded
		// machine's, as the call's read ends at it after the cancel.
		opt.ReadTimeout = time.Second * scale
	}
	// A connection idle this long is closed when the pool would hand it
	// out: the call draws a new one.
	opt.ConnMaxIdleTime = 100 * time.Millisecond
	rdb := redis.NewClient(&opt)
	t.Cleanup(func() { _ = rdb.Close() })
	var w poolWatch
	rdb.AddHook(&w)
	call, changed := c.open(t, rdb, name, redisq.Options{ManualRequeue: true})
	w.waitStale(t, opt.ConnMaxIdleTime)

	p.muted.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	if end == context.DeadlineExceeded {
		ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond*scale)
	} else {
		time.AfterFunc(100*time.Millisecond*scale, cancel)
	}
	defer cancel()
	err := call(ctx)
	// What the call wrote is in the proxy's socket; its reader may not
	// have run yet.
	var heard string
	wrote := func() bool {
		heard = strings.ToLower(p.heard())
		return strings.Contains(heard, "hello") || strings.Contains(heard, "fcall")
	}
	for end := time.Now().Add(time.Second); !wrote() && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	p.muted.Store(false)
	t.Logf("scale %d: returned %v; the proxy heard %q", scale, err, heard)
	require.NotContains(t, heard, "fcall", "the call was never written")
	require.Error(t, err)
	require.NotErrorIs(t, err, redisq.ErrMayHaveRun, "a call never written cannot have run")
	require.ErrorIs(t, err, end)
	require.Zero(t, changed(), "nothing ran")
	return strings.Contains(heard, "hello") // the call drew a new connection, whose setup stalled
}

// TestEndedContextNotInFlight: a call that carries a change, sent alone
// under a context that ended before go-redis wrote it (a deadline
// already past; a deadline that passed while the call waited for the
// one connection of the pool, which another command held), returns its
// context's error, not ErrMayHaveRun: go-redis returns the context's
// DeadlineExceeded alone, before it writes anything, and that error is
// a net.Error that timed out too, as a read's timeout is. Reported as
// may have run, a caller told to count a Publish as maybe lost would
// lose a value never published.
func TestEndedContextNotInFlight(t *testing.T) {
	srv := redistest.Start(t)
	waits := []struct {
		name string
		hold bool // another command holds the pool's one connection
	}{
		{"deadline past", false},
		{"deadline passed waiting for the pool", true},
	}
	n := 0
	for _, c := range changeCalls {
		for _, w := range waits {
			n++
			name := fmt.Sprint("endedctx-", n)
			t.Run(c.name+", "+w.name, func(t *testing.T) {
				p := startDarkProxy(t, srv.Addr)
				rdb := redis.NewClient(&redis.Options{Addr: p.addr(), MaxRetries: -1, PoolSize: 1,
					PoolTimeout: 5 * time.Second})
				t.Cleanup(func() { _ = rdb.Close() })
				var pw poolWatch
				rdb.AddHook(&pw)
				call, changed := c.open(t, rdb, name, redisq.Options{ManualRequeue: true})
				pw.waitStale(t, 0) // the housekeeper's first pass done: its FCALL is not heard below

				d := time.Now().Add(-time.Second)
				if w.hold {
					held := make(chan struct{})
					go func() {
						defer close(held)
						_ = rdb.BLPop(context.Background(), 500*time.Millisecond, name+":none").Err()
					}()
					t.Cleanup(func() { <-held })
					time.Sleep(50 * time.Millisecond) // BLPOP holds the connection
					d = time.Now().Add(100 * time.Millisecond)
				}
				ctx, cancel := context.WithDeadline(context.Background(), d)
				defer cancel()
				p.muted.Store(true)
				err := call(ctx)
				heard := strings.ToLower(p.heard())
				p.muted.Store(false)
				t.Logf("returned %v; the proxy heard %q", err, heard)
				require.NotContains(t, heard, "fcall", "the call was never written")
				require.Error(t, err)
				require.NotErrorIs(t, err, redisq.ErrMayHaveRun, "a call never written cannot have run")
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.Zero(t, changed(), "nothing ran")
			})
		}
	}
}

// poolWatch is a hook that follows a client's commands, so that a test
// can wait until its pool holds only connections idle longer than
// ConnMaxIdleTime: the next command then draws a new connection, which
// it must set up (HELLO) first.
type poolWatch struct {
	redistest.Hook
	mu       sync.Mutex // guards the fields below
	inFlight int        // commands and pipelines not yet returned (each holds a connection)
	last     time.Time  // when the last one returned, its connection back in the pool
	swept    bool       // a housekeeping call returned: the housekeeper's first pass is done
}

func (w *poolWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		w.begin()
		defer w.end(cmd)
		return next(ctx, cmd)
	}
}

func (w *poolWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		w.begin()
		defer w.end(cmds...)
		return next(ctx, cmds)
	}
}

func (w *poolWatch) begin() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inFlight++
}

// end counts cmds returned, and notes whether one was the housekeeper's:
// an FCALL of the queue's housekeep function or of the sorted queues'
// housekeep op (the FUNCTION LOAD of Open names them too: not one).
func (w *poolWatch) end(cmds ...redis.Cmder) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inFlight--
	w.last = time.Now()
	for _, c := range cmds {
		w.swept = w.swept || c.Name() == "fcall" && strings.Contains(fmt.Sprint(c.Args()...), "housekeep")
	}
}

// waitStale waits until the housekeeper's first pass is done and nothing
// is in flight (the housekeeper rests for idleRecheck now: nothing is
// pending), then until the last command ended more than idle ago: every
// connection of the pool is stale, and the next command draws a new one.
// A command that ran meanwhile starts the wait for idle again. A fixed
// pause is not enough: on a loaded machine the housekeeper's first pass
// may run well after Open, and leave a fresh connection.
func (w *poolWatch) waitStale(t *testing.T, idle time.Duration) {
	t.Helper()
	for {
		var last time.Time
		require.Eventually(t, func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			last = w.last
			return w.swept && w.inFlight == 0
		}, time.Minute, 10*time.Millisecond, "the housekeeper's first pass")
		time.Sleep(time.Until(last.Add(idle + 50*time.Millisecond))) // idle time, not synchronisation
		w.mu.Lock()
		quiet := w.inFlight == 0 && w.last.Equal(last)
		w.mu.Unlock()
		if quiet {
			return
		}
	}
}
