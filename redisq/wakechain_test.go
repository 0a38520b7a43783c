package redisq_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// endingCtx is a context that ends (Err) when told to, without closing
// Done: a consumer woken after that finds its context ended at the top of
// its next look, the moment a shutdown can meet a wake-up.
type endingCtx struct {
	context.Context
	ended atomic.Bool
}

func (c *endingCtx) Err() error {
	if c.ended.Load() {
		return context.Canceled
	}
	return nil
}

// TestWakeUpPassedOnByAnEndingWaiter: a run of enqueues announces itself
// once, and the consumer it wakes passes the wake-up on. A woken consumer
// whose context ended, leasing nothing, must pass it on too: else the
// other consumers of the handle sleep while a message is ready.
func TestWakeUpPassedOnByAnEndingWaiter(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	producer, err := redisq.Open(ctx, srv.Client(), "chain", nil)
	require.NoError(t, err)
	defer producer.Close()

	rdb := srv.Client()
	asks := newScriptCounter(nil)
	rdb.AddHook(asks)
	c, err := redisq.Open(ctx, rdb, "chain", nil)
	require.NoError(t, err)
	defer c.Close()
	calledAtLeast := func(op string, n int) {
		t.Helper()
		require.Eventually(t, func() bool { return asks.calls(op) >= n }, 30*time.Second, time.Millisecond)
	}
	calledAtLeast("housekeep", 1) // the housekeeper's first pass is done: it sleeps

	first := &endingCtx{Context: ctx}
	firstDone := make(chan error, 1)
	go func() {
		_, err := c.Dequeue(first)
		firstDone <- err
	}()
	calledAtLeast("dequeue", 1) // the first waiter looked, found nothing, and waits first in line
	second := make(chan error, 1)
	go func() {
		m, err := c.Dequeue(ctx)
		if err == nil {
			err = m.Ack()
		}
		second <- err
	}()
	calledAtLeast("dequeue", 2)
	time.Sleep(50 * time.Millisecond) // both are past their looks, waiting

	first.ended.Store(true)
	_, err = producer.Enqueue(ctx, []byte("one"))
	require.NoError(t, err)
	select {
	case err := <-firstDone:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(30 * time.Second):
		t.Fatal("the first waiter was never woken")
	}
	select {
	case err := <-second:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("a message is ready and the second waiter sleeps: the ending waiter kept the wake-up")
	}
}
