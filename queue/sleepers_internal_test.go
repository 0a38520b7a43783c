package queue

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
)

// TestSleeperThatLeftIsForgotten: a blocked Dequeue that gives up (its
// context ends) leaves no due time behind: the housekeeper does not go on
// re-checking the clock, once a second for an hour, for no one.
func TestSleeperThatLeftIsForgotten(t *testing.T) {
	q, err := Open(t.TempDir(), &Options{ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(context.Background(), []byte("x"), WithDelay(time.Hour))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = q.Dequeue(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, time.Duration(-1), q.wakeSleepers(), "no blocked call is left to wake")
	q.mu.Lock()
	defer q.mu.Unlock()
	require.Zero(t, q.mu.sleepUntil)
}

// TestSleeperThatLeftIsForgottenBesideAnother: a blocked Dequeue that
// waited for a delayed message gives up while another call stays blocked
// with no due time of its own (it waits for a signal only: here counted
// as a waiter that noted nothing). The time the first noted is forgotten
// all the same: the housekeeper does not re-check the clock once a
// second, for an hour, for a call that does not wait for it.
func TestSleeperThatLeftIsForgottenBesideAnother(t *testing.T) {
	q, err := Open(t.TempDir(), &Options{ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(context.Background(), []byte("x"), WithDelay(time.Hour))
	require.NoError(t, err)
	q.waiters.Add(1) // a call blocked with no due time
	defer q.waiters.Add(-1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = q.Dequeue(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, time.Duration(-1), q.wakeSleepers(), "no blocked call waits for a time")
	q.mu.Lock()
	defer q.mu.Unlock()
	require.Zero(t, q.mu.sleepUntil)
}

// TestSleeperThatStaysKeepsItsTime: while a call that noted a due time
// is still blocked, the time is kept (the housekeeper re-checks the clock
// for it), though another call that noted one has left.
func TestSleeperThatStaysKeepsItsTime(t *testing.T) {
	clk := fakeclock.New()
	q, err := Open(t.TempDir(), &Options{ManualRequeue: true, Clock: clk})
	require.NoError(t, err)
	defer q.Close()
	var looks atomic.Int64 // each look of a blocked Dequeue that found nothing
	q.foundNothing = func() { looks.Add(1) }
	_, err = q.Enqueue(context.Background(), []byte("x"), WithDelay(time.Hour))
	require.NoError(t, err)
	stay, cancelStay := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := q.Dequeue(stay); done <- err }()
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() { _, err := q.Dequeue(ctx); left <- err }()
	waitFor(t, func() bool { return looks.Load() == 4 }) // both asleep, their times noted
	cancel()
	require.ErrorIs(t, <-left, context.Canceled)
	require.Positive(t, q.wakeSleepers(), "the call still blocked waits for the message's time")
	clk.Advance(time.Hour) // the message is due: the housekeeper wakes the call that stayed
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		cancelStay()
		t.Fatal("the call that stayed slept past its time")
	}
	cancelStay()
}
