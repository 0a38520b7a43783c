package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
)

// changeCall is a call that carries a change, sent alone under its
// caller's context, on a handle of its own opened with options o: call
// makes it, changed counts what the queue holds (the messages ready,
// the values pending).
type changeCall struct {
	name string
	open func(t *testing.T, rdb redis.UniversalClient, name string, o redisq.Options) (call func(context.Context) error, changed func() int64)
}

// changeCalls are the calls whose caller is told ErrMayHaveRun when its
// context ends while the call is in flight.
var changeCalls = append(append([]changeCall{}, enqueueCalls...), publishCalls...)

// enqueueCalls are the changeCalls of an ack queue.
var enqueueCalls = []changeCall{
	{"Enqueue", func(t *testing.T, rdb redis.UniversalClient, name string, o redisq.Options) (func(context.Context) error, func() int64) {
		q := openQueue(t, rdb, name, o)
		return func(ctx context.Context) error {
			_, err := q.Enqueue(ctx, []byte("x"))
			return err
		}, readyOf(t, q)
	}},
	{"Enqueue WithID", func(t *testing.T, rdb redis.UniversalClient, name string, o redisq.Options) (func(context.Context) error, func() int64) {
		q := openQueue(t, rdb, name, o)
		return func(ctx context.Context) error {
			_, err := q.Enqueue(ctx, []byte("x"), queue.WithID("given"))
			return err
		}, readyOf(t, q)
	}},
	{"EnqueueBatch", func(t *testing.T, rdb redis.UniversalClient, name string, o redisq.Options) (func(context.Context) error, func() int64) {
		q := openQueue(t, rdb, name, o)
		return func(ctx context.Context) error {
			_, err := q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("a")}, {ID: "given", Payload: []byte("b")}})
			return err
		}, readyOf(t, q)
	}},
}

// publishCalls are the changeCalls of a sorted and a windowed queue.
var publishCalls = []changeCall{
	{"Sorted Publish", func(t *testing.T, rdb redis.UniversalClient, name string, o redisq.Options) (func(context.Context) error, func() int64) {
		s, err := redisq.OpenSorted[int64](context.Background(), rdb, name, &redisq.SortedOptions{Options: o})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return func(ctx context.Context) error { return s.Publish(ctx, 1, "k", []byte("x")) }, pendingOf(t, s)
	}},
	{"Windowed Publish", func(t *testing.T, rdb redis.UniversalClient, name string, o redisq.Options) (func(context.Context) error, func() int64) {
		w, err := redisq.OpenWindowed(context.Background(), rdb, name, &redisq.WindowOptions{
			SortedOptions: redisq.SortedOptions{Options: o}, Window: time.Hour})
		require.NoError(t, err)
		t.Cleanup(func() { _ = w.Close() })
		return func(ctx context.Context) error { return w.Publish(ctx, "k", []byte("x")) }, pendingOf(t, w.Sorted)
	}},
}

func openQueue(t *testing.T, rdb redis.UniversalClient, name string, o redisq.Options) *redisq.Queue {
	t.Helper()
	q, err := redisq.Open(context.Background(), rdb, name, &o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	return q
}

// readyOf counts the messages ready in q.
func readyOf(t *testing.T, q *redisq.Queue) func() int64 {
	return func() int64 {
		st, err := q.StatsContext(context.Background())
		require.NoError(t, err)
		return st.Ready
	}
}

// pendingOf counts the values pending in s.
func pendingOf[K queue.SortKey](t *testing.T, s *redisq.Sorted[K]) func() int64 {
	return func() int64 {
		st, err := s.StatsContext(context.Background())
		require.NoError(t, err)
		return int64(st.SortedPending)
	}
}
