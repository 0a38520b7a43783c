package redisq_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// limitQueue opens a handle on the queue name with the limit maxd. Its
// leases last an hour: a batch of thousands may take long on a loaded
// machine, and no test of the limit waits for a lease to run out.
func limitQueue(t *testing.T, rdb redis.UniversalClient, name string, maxd int) *redisq.Queue {
	t.Helper()
	q, err := redisq.Open(context.Background(), rdb, name, &redisq.Options{MaxDeliveries: maxd, ManualRequeue: true, AckTimeout: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	return q
}

// deliverTimes enqueues the payloads on q (a handle with no limit) and
// gives each back after n deliveries.
func deliverTimes(t *testing.T, q *redisq.Queue, n int, payloads ...string) {
	t.Helper()
	ctx := context.Background()
	items := make([]queue.Item, len(payloads))
	for i, p := range payloads {
		items[i] = queue.Item{Payload: []byte(p)}
	}
	_, err := q.EnqueueBatch(ctx, items)
	require.NoError(t, err)
	for range n {
		ms, err := q.DequeueBatch(ctx, len(payloads))
		require.NoError(t, err)
		require.Len(t, ms, len(payloads))
		require.NoError(t, ms.Nack(0))
	}
}

// TestLimitAtDequeue: a ready message that had MaxDeliveries already
// (given back by a handle with no limit) is dead-lettered by the dequeue
// of a handle that applies the limit, with the embedded queue's reason,
// and the dequeue delivers the next message instead, for each way of
// dequeuing.
func TestLimitAtDequeue(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		dequeue func(q *redisq.Queue) (queue.Messages, error)
	}{
		{"TryDequeue", func(q *redisq.Queue) (queue.Messages, error) {
			m, err := q.TryDequeue()
			return queue.Messages{m}, err
		}},
		{"Dequeue", func(q *redisq.Queue) (queue.Messages, error) {
			m, err := q.Dequeue(ctx)
			return queue.Messages{m}, err
		}},
		{"DequeueBatch", func(q *redisq.Queue) (queue.Messages, error) {
			return q.DequeueBatch(ctx, 1)
		}},
		{"DequeueBatchMany", func(q *redisq.Queue) (queue.Messages, error) {
			return q.DequeueBatch(ctx, 10)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loose := limitQueue(t, srv.Client(), "limit-"+tc.name, -1)
			deliverTimes(t, loose, 2, "a", "b", "c")
			ms, err := loose.DequeueBatch(ctx, 2) // ready again: lowest seq first
			require.NoError(t, err)
			require.Equal(t, []string{"a", "b"}, []string{string(ms[0].Payload), string(ms[1].Payload)})
			require.NoError(t, ms.Nack(0))
			strict := limitQueue(t, srv.Client(), "limit-"+tc.name, 3)
			ms, err = tc.dequeue(strict)
			require.NoError(t, err)
			require.Len(t, ms, 1, "only c is under the limit")
			require.Equal(t, "c", string(ms[0].Payload))
			require.Equal(t, 3, ms[0].Deliveries)
			st, err := strict.StatsContext(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(2), st.Dead)
			require.Equal(t, int64(0), st.Ready)
			require.Equal(t, uint64(2), st.DeadLettered)
			dead, err := strict.DeadLetters(0, 10)
			require.NoError(t, err)
			require.Len(t, dead, 2)
			for _, d := range dead {
				require.Equal(t, "3 deliveries, limit 3; not delivered again", d.Reason)
				require.Equal(t, 3, d.Deliveries)
			}
			_, err = strict.TryDequeue()
			require.ErrorIs(t, err, queue.ErrEmpty)
		})
	}
}

// TestLimitAtDequeueBounded: a dequeue that meets more messages past the
// limit than one call dead-letters (scripts/common.lua, BURIES: 1,000)
// still returns the deliverable message behind them, and leaves none of
// them ready, alone or in a batch; it takes three script calls for the
// 2,500 of them, so that no call holds the server for all of them.
func TestLimitAtDequeueBounded(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for _, max := range []int{1, 10} {
		t.Run(fmt.Sprint("max", max), func(t *testing.T) {
			name := fmt.Sprint("bound", max)
			loose := limitQueue(t, srv.Client(), name, -1)
			past := make([]string, 2500)
			for i := range past {
				past[i] = fmt.Sprint("p", i)
			}
			deliverTimes(t, loose, 1, past...)
			_, err := loose.Enqueue(ctx, []byte("fresh"))
			require.NoError(t, err)
			rdb := srv.Client()
			calls := &dequeueCalls{}
			rdb.AddHook(calls)
			strict := limitQueue(t, rdb, name, 1)
			// A bounded wait: a dequeue that wrongly found nothing would
			// block, and must fail the test instead.
			bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			ms, err := strict.DequeueBatch(bctx, max)
			cancel()
			require.NoError(t, err)
			require.Len(t, ms, 1)
			require.Equal(t, "fresh", string(ms[0].Payload))
			require.Equal(t, int64(3), calls.n.Load(), "1,000 kills, 1,000 kills, 500 kills and the lease")
			st, err := strict.StatsContext(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(len(past)), st.Dead)
			require.Equal(t, int64(0), st.Ready)
		})
	}
}

// dequeueCalls counts the dequeue script calls of a client.
type dequeueCalls struct {
	redistest.Hook
	n atomic.Int64
}

func (c *dequeueCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name, ok := fcallName(cmd); ok && strings.HasSuffix(name, "_dequeue") {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
