package redisq_test

import (
	"context"
	"fmt"
	"strings"
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
		{"cancel, ReadTimeout", redis.Options{ReadTimeout: 300 * time.Millisecond}, context.Canceled},
	}
	n := 0
	for _, c := range changeCalls {
		for _, cl := range clients {
			n++
			name := fmt.Sprint("setupstall-", n)
			t.Run(c.name+", "+cl.name, func(t *testing.T) {
				p := startDarkProxy(t, srv.Addr)
				opt := cl.opt
				opt.Addr = p.addr()
				opt.MaxRetries = -1
				// A connection idle this long is closed when the pool
				// would hand it out: the call draws a new one.
				opt.ConnMaxIdleTime = 100 * time.Millisecond
				rdb := redis.NewClient(&opt)
				t.Cleanup(func() { _ = rdb.Close() })
				call, changed := c.open(t, rdb, name, redisq.Options{ManualRequeue: true})
				time.Sleep(300 * time.Millisecond) // the housekeeper's first pass done, each connection idle

				p.muted.Store(true)
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				if cl.end == context.Canceled {
					time.AfterFunc(100*time.Millisecond, cancel)
				}
				err := call(ctx)
				heard := strings.ToLower(p.heard())
				p.muted.Store(false)
				t.Logf("returned %v; the proxy heard %q", err, heard)
				require.Contains(t, heard, "hello", "the call drew a new connection, whose setup stalled")
				require.NotContains(t, heard, "fcall", "the call was never written")
				require.Error(t, err)
				require.NotErrorIs(t, err, redisq.ErrMayHaveRun, "a call never written cannot have run")
				require.ErrorIs(t, err, cl.end)
				require.Zero(t, changed(), "nothing ran")
			})
		}
	}
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
				call, changed := c.open(t, rdb, name, redisq.Options{ManualRequeue: true})
				time.Sleep(200 * time.Millisecond) // the housekeeper's first pass done

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
