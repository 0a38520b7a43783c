package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestOpenWaitTimeoutAboveReadTimeout: go-redis fails a whole pipeline
// when one reply outlasts the client's ReadTimeout, so a WAIT that waits
// longer loses the reply of the call that ran before it: an enqueue that
// was made reports an i/o timeout. Open refuses such a WaitTimeout, and a
// handle whose WAIT fits in the ReadTimeout reports a short WAIT as
// ErrNotDurable. A client without a read timeout bounds no WAIT.
func TestOpenWaitTimeoutAboveReadTimeout(t *testing.T) {
	srv := redistest.Start(t) // no replica: every WAIT runs to WaitTimeout
	ctx := context.Background()
	client := func(rt time.Duration) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ReadTimeout: rt})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	wait := func(d time.Duration) *redisq.Options {
		return &redisq.Options{Replicas: 1, WaitTimeout: d, ManualRequeue: true}
	}
	for _, tc := range []struct {
		name string
		rt   time.Duration
		wait time.Duration
	}{
		{"above", 200 * time.Millisecond, 600 * time.Millisecond},
		{"equal", 300 * time.Millisecond, 300 * time.Millisecond},
		{"default read timeout", 0, 6 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := redisq.Open(ctx, client(tc.rt), "rt-"+tc.name, wait(tc.wait))
			if err == nil {
				_, err = q.Enqueue(ctx, []byte("made"))
				_ = q.Close()
				t.Fatalf("Open accepted WaitTimeout %v with ReadTimeout %v; the enqueue then said: %v", tc.wait, tc.rt, err)
			}
			require.ErrorIs(t, err, queue.ErrInvalidOptions)
			require.ErrorContains(t, err, "ReadTimeout")
		})
	}
	for _, tc := range []struct {
		name string
		rt   time.Duration
		wait time.Duration
	}{
		{"below", 600 * time.Millisecond, 100 * time.Millisecond},
		{"no timeout", -1, 100 * time.Millisecond},
		{"no deadline", -2, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := redisq.Open(ctx, client(tc.rt), "rt-"+tc.name, wait(tc.wait))
			require.NoError(t, err)
			defer q.Close()
			_, err = q.Enqueue(ctx, []byte("made"))
			require.ErrorIs(t, err, redisq.ErrNotDurable)
		})
	}
}
