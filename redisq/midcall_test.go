package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// busy keeps the server busy for d with a script on a connection of its
// own, so that the calls sent meanwhile wait for their reply.
func busy(t *testing.T, srv *redistest.Server, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Client().Eval(context.Background(), `local t0 = redis.call('TIME')
local s = t0[1] * 1000000 + t0[2]
while true do
  local t = redis.call('TIME')
  if t[1] * 1000000 + t[2] - s > tonumber(ARGV[1]) then return 1 end
end`, nil, d.Microseconds()).Err()
	}()
	t.Cleanup(func() { <-done })
	time.Sleep(d / 10) // the script runs
}

// timedClient is a client of srv that ends a command's wait for its reply
// when the command's context ends (go-redis ContextTimeoutEnabled).
func timedClient(t *testing.T, srv *redistest.Server) *redis.Client {
	opt := *srv.Client().Options()
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1 // Options() holds it normalized: 0, which NewClient reads as 3
	rdb := redis.NewClient(&opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// TestDequeueCtxEndsMidCall: a Dequeue whose context ends while its call
// waits for the server's reply must not lose what the server leased: it
// returns the message, or leases nothing. Else the message stays leased,
// unseen, until AckTimeout, its delivery counted.
func TestDequeueCtxEndsMidCall(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for _, batch := range []bool{false, true} {
		name := map[bool]string{false: "dequeue", true: "batch"}[batch]
		t.Run(name, func(t *testing.T) {
			q, err := redisq.Open(ctx, timedClient(t, srv), "midcall-"+name, &redisq.Options{ManualRequeue: true, AckTimeout: time.Hour})
			require.NoError(t, err)
			defer q.Close()
			_, err = q.Enqueue(ctx, []byte("a"))
			require.NoError(t, err)
			busy(t, srv, 500*time.Millisecond)
			c, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			var got int
			if batch {
				ms, err := q.DequeueBatch(c, 2)
				got = len(ms)
				t.Logf("DequeueBatch: %d messages, %v", len(ms), err)
			} else {
				m, err := q.Dequeue(c)
				if m != nil {
					got = 1
				}
				t.Logf("Dequeue: %v, %v", m != nil, err)
			}
			st, err := q.StatsContext(ctx)
			require.NoError(t, err)
			require.EqualValues(t, got, st.InFlight, "messages leased on the server but not returned")
		})
	}
}

// TestPullCtxEndsMidCall is TestDequeueCtxEndsMidCall for a sorted queue.
func TestPullCtxEndsMidCall(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := redisq.OpenSorted[int64](ctx, timedClient(t, srv), "midcall-sorted",
		&redisq.SortedOptions{Options: redisq.Options{ManualRequeue: true, AckTimeout: time.Hour}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "k", []byte("v")))
	busy(t, srv, 500*time.Millisecond)
	c, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	bs, err := s.Pull(c, 10)
	t.Logf("Pull: %d batches, %v", len(bs), err)
	st, err := s.StatsContext(ctx)
	require.NoError(t, err)
	require.EqualValues(t, len(bs), st.SortedBatches, "batches leased on the server but not returned")
}
