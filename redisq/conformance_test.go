package redisq_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

var queueNames atomic.Int64

// TestConformance runs the engine-independent suite against Redis: one
// server for the suite, a fresh queue name per subtest; another handle
// is a second Open of the same name.
func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	queuetest.TestAckQueue(t, queuetest.Engine{
		Open: func(t *testing.T, o queuetest.Options) (queue.AckQueue, func() queue.AckQueue) {
			name := fmt.Sprint("conformance-", queueNames.Add(1))
			opts := &redisq.Options{AckTimeout: o.AckTimeout, MaxDeliveries: o.MaxDeliveries,
				DedupWindow: o.DedupWindow, Clock: o.Clock, ManualRequeue: true}
			q, err := redisq.Open(context.Background(), rdb, name, opts)
			require.NoError(t, err)
			return q, func() queue.AckQueue {
				q2, err := redisq.Open(context.Background(), rdb, name, opts)
				require.NoError(t, err)
				t.Cleanup(func() { _ = q2.Close() })
				return q2
			}
		},
	})
}

// TestSortedConformance runs the suite of sorted and windowed queues
// against Redis.
func TestSortedConformance(t *testing.T) {
	srv := redistest.Start(t)
	queuetest.TestSorted(t, sortedEngine(srv.Client(), "", nil))
}

// sortedEngine opens the suite's sorted and windowed queues on rdb, each
// under a fresh name with prefix; opened, when not nil, sees every name.
func sortedEngine(rdb redis.UniversalClient, prefix string, opened func(t *testing.T, name string)) queuetest.SortedEngine {
	ctx := context.Background()
	opts := func(o queuetest.SortedOptions) redisq.SortedOptions {
		return redisq.SortedOptions{SingleFlight: o.SingleFlight, Options: redisq.Options{AckTimeout: o.AckTimeout,
			MaxDeliveries: o.MaxDeliveries, Clock: o.Clock, ManualRequeue: true}}
	}
	name := func(t *testing.T, kind string) string {
		n := fmt.Sprint(prefix, kind, "-", queueNames.Add(1))
		if opened != nil {
			opened(t, n)
		}
		return n
	}
	var mu sync.Mutex
	names := map[queue.SortedQueue[int64]]string{}
	return queuetest.SortedEngine{
		Open: func(t *testing.T, o queuetest.SortedOptions) queue.SortedQueue[int64] {
			so := opts(o)
			n := name(t, "sorted")
			q, err := redisq.OpenSorted[int64](ctx, rdb, n, &so)
			require.NoError(t, err)
			mu.Lock()
			names[q] = n
			mu.Unlock()
			return q
		},
		OpenReadOnly: func(t *testing.T, q queue.SortedQueue[int64]) queue.SortedQueue[int64] {
			mu.Lock()
			n := names[q]
			mu.Unlock()
			r, err := redisq.OpenSorted[int64](ctx, rdb, n, &redisq.SortedOptions{Options: redisq.Options{ReadOnly: true}})
			require.NoError(t, err)
			return r
		},
		OpenWindowed: func(t *testing.T, o queuetest.SortedOptions) queue.WindowedQueue {
			q, err := redisq.OpenWindowed(ctx, rdb, name(t, "windowed"),
				&redisq.WindowOptions{SortedOptions: opts(o), Window: o.Window})
			require.NoError(t, err)
			return q
		},
	}
}

// TestAckSameReceiptConcurrently: concurrent Acks of one receipt are
// coalesced into one script call, and only one of them succeeds.
func TestAckSameReceiptConcurrently(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	q, err := redisq.Open(ctx, srv.Client(), "same-receipt", nil)
	require.NoError(t, err)
	defer q.Close()
	for range 20 {
		ids, err := q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("decoy")}, {Payload: []byte("x")}})
		require.NoError(t, err)
		require.Len(t, ids, 2)
		ms, err := q.DequeueBatch(ctx, 2)
		require.NoError(t, err)
		require.Len(t, ms, 2)
		// The decoy's ack keeps the coalescer busy while the eight acks
		// of one receipt queue up behind it and go out together.
		errs := make(chan error, 9)
		for range 8 {
			go func() { errs <- ms[1].Ack() }()
		}
		go func() { errs <- ms[0].Ack() }() // started last, run first
		ok := 0
		for range 9 {
			if err := <-errs; err == nil {
				ok++
			} else {
				require.ErrorIs(t, err, queue.ErrLeaseLost)
			}
		}
		require.Equal(t, 2, ok, "the decoy's ack and one ack of the other delivery succeed")
	}
}

// TestAckGatheredStampsIDs: gathered Acks of messages their producers
// named stamp each id for the dedup window, as lone ones do: every id
// acked is refused again within the window.
func TestAckGatheredStampsIDs(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	q, err := redisq.Open(ctx, srv.Client(), "gathered-stamps", &redisq.Options{DedupWindow: time.Hour})
	require.NoError(t, err)
	defer q.Close()
	for round := range 10 {
		var items []queue.Item
		for i := range 6 {
			items = append(items, queue.Item{ID: fmt.Sprintf("r%d-%d", round, i), Payload: []byte("x")})
		}
		_, err := q.EnqueueBatch(ctx, items)
		require.NoError(t, err)
		ms, err := q.DequeueBatch(ctx, len(items))
		require.NoError(t, err)
		require.Len(t, ms, len(items))
		// The first ack keeps the coalescer busy while the others queue
		// up behind it and go out together.
		errs := make(chan error, len(ms))
		for _, m := range ms[1:] {
			go func() { errs <- m.Ack() }()
		}
		go func() { errs <- ms[0].Ack() }()
		for range ms {
			require.NoError(t, <-errs)
		}
		for _, it := range items {
			_, err := q.Enqueue(ctx, it.Payload, queue.WithID(it.ID))
			require.ErrorIs(t, err, queue.ErrDuplicate, it.ID)
		}
	}
}
