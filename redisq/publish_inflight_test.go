package redisq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestPublishLeavesInFlight: a sorted or windowed Publish, which the
// server runs but whose reply a proxy drops, and whose client stops
// waiting for it once the Publish's context ended (at the context's
// deadline, ContextTimeoutEnabled; at the client's ReadTimeout after a
// cancel; or a client that would send it again itself, AcceptDoubleRuns,
// whose wait before that send ends with the context), returns
// ErrMayHaveRun wrapping its context's error, as a lone Enqueue does,
// not the context's error alone: its value is published. A caller told
// only the context's error could not tell "not published" from "maybe
// published", and its Publish sent again would publish the value twice.
func TestPublishLeavesInFlight(t *testing.T) {
	srv := redistest.Start(t)
	clients := []struct {
		name string
		opt  redis.Options
		end  error
	}{
		{"deadline, ContextTimeoutEnabled", redis.Options{ContextTimeoutEnabled: true}, context.DeadlineExceeded},
		{"cancel, ReadTimeout", redis.Options{ReadTimeout: 300 * time.Millisecond}, context.Canceled},
		{"cancel, ReadTimeout, client retries", redis.Options{ReadTimeout: 300 * time.Millisecond, MaxRetries: 2},
			context.Canceled},
	}
	n := 0
	for _, c := range publishCalls {
		for _, cl := range clients {
			n++
			name := fmt.Sprint("publishinflight-", n)
			t.Run(c.name+", "+cl.name, func(t *testing.T) {
				p := startDarkProxy(t, srv.Addr)
				opt := cl.opt
				opt.Addr = p.addr()
				resends := opt.MaxRetries > 0
				if !resends {
					opt.MaxRetries = -1
				}
				rdb := redis.NewClient(&opt)
				t.Cleanup(func() { _ = rdb.Close() })
				call, changed := c.open(t, rdb, name, redisq.Options{ManualRequeue: true, AcceptDoubleRuns: resends})
				// Connections of the pool made and greeted (HELLO), for the
				// call to draw, and the housekeeper's first pass done: the
				// server's reply is all the proxy drops.
				require.Zero(t, changed())
				time.Sleep(200 * time.Millisecond)

				p.muted.Store(true)
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				if cl.end == context.Canceled {
					time.AfterFunc(100*time.Millisecond, cancel)
				}
				err := call(ctx)
				p.muted.Store(false)
				t.Logf("returned %v", err)
				require.ErrorIs(t, err, redisq.ErrMayHaveRun, "the server ran its call")
				require.ErrorIs(t, err, cl.end)
				require.Equal(t, int64(1), changed(), "the value is published, once")
			})
		}
	}
}
