package redisq

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/walq/walq/redisq/internal/redistest"
)

// openDials is a client hook that makes the commands Open sends meet a
// dead address, as they do after a cluster's primary died and before
// the client learns which replica took over: each command that fail
// picks fails with a dial error instead of going out, the first time
// only (times: 1) or every time (times: 0); and once armed (after the
// last command before the subscription), the next subDials dials fail,
// which are the subscription's (the pool's connection is made by then).
type openDials struct {
	redistest.Hook
	fail     func(args string) bool // args: the command's arguments, fmt.Sprint
	times    int                    // how many sends of each picked command fail; 0: all
	subDials atomic.Int32           // dials still to fail once armed
	arm      int32                  // subDials, set after the ACL probe returns
	mu       sync.Mutex
	failed   map[string]int // sends failed, by command
	err      error          // what they fail with
}

func (o *openDials) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if o.subDials.Add(-1) >= 0 {
			o.mu.Lock()
			o.failed["subscribe dial"]++
			o.mu.Unlock()
			return nil, o.err
		}
		return next(ctx, network, addr)
	}
}

func (o *openDials) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := fmt.Sprint(cmd.Args())
		if o.fail(args) {
			o.mu.Lock()
			n := o.failed[args]
			if o.times == 0 || n < o.times {
				o.failed[args] = n + 1
				o.mu.Unlock()
				cmd.SetErr(o.err)
				return o.err
			}
			o.mu.Unlock()
		}
		err := next(ctx, cmd)
		if strings.Contains(args, "_probe ") && err == nil {
			o.subDials.Store(o.arm)
		}
		return err
	}
}

// TestOpenRidesDialErrors: each command Open sends that is safe to send
// again (the reads of the server's configuration, of an older layout and
// of the libraries, the library's load, the functions that write
// nothing, a sorted queue's records of its kind, and the subscription)
// is sent again when it could not be sent (a dial error), as a call
// is: Open succeeds, its handle works. A command that never gets
// through fails Open after OpTimeout, saying that it was sent again for
// that long and why.
func TestOpenRidesDialErrors(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	open := func(rdb redis.UniversalClient, name string, sorted bool) (interface{ Close() error }, error) {
		o := &Options{ManualRequeue: true, OpTimeout: 2 * time.Second}
		if sorted {
			return OpenSorted[string](ctx, rdb, name, &SortedOptions{Options: *o, SingleFlight: true})
		}
		return Open(ctx, rdb, name, o)
	}
	has := func(s string) func(string) bool { return func(a string) bool { return strings.Contains(a, s) } }
	for _, c := range []struct {
		name     string
		sorted   bool
		fail     func(string) bool
		subDials int32
		want     int // sends failed
	}{
		{name: "config get", fail: has("config get"), want: 3},
		{name: "layout get", fail: has("get walq:{"), want: 1},
		// FUNCTION LIST alone failing is no case: Open then loads the
		// library without reading the list. Both failing is.
		{name: "function list and load", fail: has("function l"), want: 2},
		{name: "function load", fail: has("function load"), want: 1},
		{name: "writable fcall", fail: has("_writable "), want: 1},
		{name: "acl probe fcall", fail: has("_probe "), want: 1},
		{name: "subscribe", fail: func(string) bool { return false }, subDials: 2, want: 2},
		{name: "sorted hget", sorted: true, fail: has("hget "), want: 3},
		{name: "sorted hsetnx", sorted: true, fail: has("hsetnx "), want: 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, srv.Client().FunctionFlush(ctx).Err())
			hook := &openDials{fail: c.fail, times: 1, arm: c.subDials, failed: map[string]int{}, err: dialErr}
			// DialerRetries 1: a failed dial is the command's, not retried
			// within go-redis's dial.
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialerRetries: 1})
			t.Cleanup(func() { _ = rdb.Close() })
			rdb.AddHook(hook)
			name := "opendial-" + strings.ReplaceAll(c.name, " ", "-")
			h, err := open(rdb, name, c.sorted)
			require.NoError(t, err, "Open rides a command that could not be sent")
			defer h.Close()
			hook.mu.Lock()
			n := 0
			for _, k := range hook.failed {
				n += k
			}
			hook.mu.Unlock()
			require.Equal(t, c.want, n, "the injected dial errors were met: %v", hook.failed)
			if q, ok := h.(*Queue); ok {
				_, err := q.Enqueue(ctx, []byte("x"))
				require.NoError(t, err)
				st, err := q.StatsContext(ctx)
				require.NoError(t, err)
				require.Equal(t, int64(1), st.Ready)
			}
		})
	}
	t.Run("never sent", func(t *testing.T) {
		hook := &openDials{fail: has("config get"), failed: map[string]int{}, err: dialErr}
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialerRetries: 1})
		t.Cleanup(func() { _ = rdb.Close() })
		rdb.AddHook(hook)
		_, err := Open(ctx, rdb, "opendial-never", &Options{OpTimeout: 300 * time.Millisecond})
		require.Error(t, err)
		var oe *net.OpError
		require.True(t, errors.As(err, &oe) && oe.Op == "dial", "the dial's error is kept: %v", err)
		require.ErrorContains(t, err, "sent again within 300ms, Options.OpTimeout, while no connection could be made")
		hook.mu.Lock()
		defer hook.mu.Unlock()
		require.Greater(t, hook.failed["[config get appendonly]"], 1, "sent again: %v", hook.failed)
	})
}
