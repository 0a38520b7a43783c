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

// herdCase is one kind of blocked consumer for TestResubscribeWakesOne.
type herdCase struct {
	name string
	op   string // the operation whose script calls are the consumers' looks (scriptCounter)
	// open opens the consumer's handle on rdb and a producer's on
	// srv's own client; take blocks for one message or key and settles
	// it (nil), add makes message i ready, waiting counts the blocked
	// consumers of the consumer's handle.
	open func(t *testing.T, srv *redistest.Server, rdb redis.UniversalClient) (take func(context.Context) error, add func(i int) error, waiting func() int)
}

// TestResubscribeWakesOne: the handle's subscription drops (its
// connection killed, as by a server restart or a failover) while many
// consumers are blocked, and a few messages are made ready before it
// subscribes again, announced to no one (pub/sub is at most once). Once
// subscribed again, every message reaches a blocked consumer, the first
// consumer in line (its context ended unseen: it returns without looking)
// passing the wake-up on; and the consumers look no more than the
// messages need (one look each, and one that finds nothing), not once
// each: a server back from a fault is not met by a herd of script calls.
func TestResubscribeWakesOne(t *testing.T) {
	cases := []herdCase{
		{name: "dequeue", op: "dequeue", open: openHerdQueue},
		{name: "sorted pull", op: "grow", open: openHerdSorted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { testResubscribeWakesOne(t, tc) })
	}
}

func testResubscribeWakesOne(t *testing.T, tc herdCase) {
	const consumers, messages = 12, 3
	ctx := context.Background()
	srv := redistest.Start(t)
	g := newGatedDials()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, Dialer: g.dial})
	t.Cleanup(func() { _ = rdb.Close() })
	t.Cleanup(g.release) // first: ends any dial still held
	looks := newScriptCounter(nil)
	rdb.AddHook(looks)
	take, add, waiting := tc.open(t, srv, rdb)

	// The first in line, whose context ends unseen once the subscription
	// is cut, then the others, each waiting once it looked.
	first := &endingCtx{Context: ctx}
	firstDone := make(chan error, 1)
	go func() { firstDone <- take(first) }()
	require.Eventually(t, func() bool { return waiting() == 1 }, 30*time.Second, time.Millisecond, "the first waits")
	rest, stop := context.WithCancel(ctx)
	defer stop()
	got := make(chan error, consumers-1)
	for range consumers - 1 {
		go func() { got <- take(rest) }()
	}
	require.Eventually(t, func() bool { return waiting() == consumers && looks.calls(tc.op) >= consumers },
		30*time.Second, time.Millisecond, "all wait, having looked")

	g.hold()
	n, err := srv.Client().ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
	require.NoError(t, err)
	require.Positive(t, n, "the subscriptions' connections killed")
	require.Eventually(t, func() bool { return g.heldDials() > 0 }, 10*time.Second, 5*time.Millisecond,
		"the subscription dials again")
	first.ended.Store(true)
	for i := range messages { // announced to no subscriber of the consumer's handle
		require.NoError(t, add(i))
	}
	before := looks.calls(tc.op)
	g.release()

	select {
	case err := <-firstDone:
		require.ErrorIs(t, err, context.Canceled, "the first in line, woken")
	case <-time.After(10 * time.Second):
		t.Fatal("the first in line was not woken by the subscription made again")
	}
	for i := range messages {
		select {
		case err := <-got:
			require.NoError(t, err, "consumer %d", i)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d messages still wait for a consumer 10s after the subscription could dial again", messages-i, messages)
		}
	}
	// Every consumer woken has begun its look once all that are left
	// wait again (a consumer registers before it looks): those looks are
	// counted once the consumers return.
	left := consumers - 1 - messages
	require.Eventually(t, func() bool { return waiting() == left }, 30*time.Second, time.Millisecond, "the others wait again")
	stop()
	for range left {
		require.ErrorIs(t, <-got, context.Canceled)
	}
	after := looks.calls(tc.op) - before
	t.Logf("%d looks after the resubscription, for %d messages and %d blocked consumers", after, messages, consumers)
	require.LessOrEqual(t, after, messages+1, "one look per message and one that finds none: only a chain of consumers wakes")
}

// openHerdQueue opens ack queues for testResubscribeWakesOne.
func openHerdQueue(t *testing.T, srv *redistest.Server, rdb redis.UniversalClient) (func(context.Context) error, func(int) error, func() int) {
	ctx := context.Background()
	q, err := redisq.Open(ctx, rdb, "herd", &redisq.Options{ManualRequeue: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	producer, err := redisq.Open(ctx, srv.Client(), "herd", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = producer.Close() })
	take := func(ctx context.Context) error {
		m, err := q.Dequeue(ctx)
		if err != nil {
			return err
		}
		return m.Ack()
	}
	add := func(i int) error {
		_, err := producer.Enqueue(ctx, []byte(fmt.Sprint(i)))
		return err
	}
	return take, add, func() int { return redisq.QueueWaiting(q) }
}

// openHerdSorted opens sorted queues for testResubscribeWakesOne: each
// message is a key of its own.
func openHerdSorted(t *testing.T, srv *redistest.Server, rdb redis.UniversalClient) (func(context.Context) error, func(int) error, func() int) {
	ctx := context.Background()
	o := &redisq.SortedOptions{Options: redisq.Options{ManualRequeue: true}}
	s, err := redisq.OpenSorted[int64](ctx, rdb, "herd", o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	producer, err := redisq.OpenSorted[int64](ctx, srv.Client(), "herd", o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = producer.Close() })
	take := func(ctx context.Context) error {
		bs, err := s.Pull(ctx, 1)
		if err != nil {
			return err
		}
		for _, b := range bs {
			if err := b.Ack(); err != nil {
				return err
			}
		}
		return nil
	}
	add := func(i int) error {
		return producer.Publish(ctx, int64(i), fmt.Sprint("key", i), []byte{byte(i)})
	}
	return take, add, func() int { return redisq.Waiting(s) }
}
