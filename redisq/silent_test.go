package redisq_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

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
