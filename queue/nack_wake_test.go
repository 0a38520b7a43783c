package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/internal/faultfs"
)

// A consumer asleep because the only message is leased to another is
// woken by that message's nack, as the README promises ("woken by an
// enqueue, a nack or a lease running out"): a nack without delay at once,
// a nack with a delay when the delay ends; Dequeue, DequeueBatch and a
// sorted Pull alike.
func TestConsumerAsleepWakesOnNack(t *testing.T) {
	batch := func(ctx context.Context, q *Queue) error {
		ms, err := q.DequeueBatch(ctx, 10)
		if err == nil {
			err = ms.Ack()
		}
		return err
	}
	batchSleeper := sleeper{open: dequeueSleeper.open, deliver: batch, looks: dequeueSleeper.looks}
	for name, c := range map[string]struct {
		k     sleeper
		setup func(t *testing.T, q *Queue) func(delay time.Duration) error // leases the one message, returns its nack
	}{
		"Dequeue":      {dequeueSleeper, heldNack},
		"DequeueBatch": {batchSleeper, heldNack},
		"NackID":       {dequeueSleeper, heldNackID},
		"SettleAsync":  {dequeueSleeper, heldNackAsync},
		"Pull":         {pullSleeper, pulledNack},
	} {
		for _, delay := range []time.Duration{0, time.Minute} {
			t.Run(name+"/"+delay.String(), func(t *testing.T) {
				clk := fakeclock.New()
				q := c.k.open(t, faultfs.New(0), Options{Clock: clk, ManualRequeue: true})
				defer q.Close()
				nack := c.setup(t, q)
				got := sleepingConsumer(t, c.k, q)
				require.NoError(t, nack(delay))
				clk.Advance(delay)
				select {
				case err := <-got:
					require.NoError(t, err, "the consumer woken by the nack")
				case <-time.After(hangBound):
					t.Fatal("the consumer asleep slept through the nack of the message")
				}
			})
		}
	}
}

// sleepingConsumer starts a consumer of k's kind on q and returns once it
// sleeps, with the channel that gets its outcome.
func sleepingConsumer(t *testing.T, k sleeper, q *Queue) <-chan error {
	t.Helper()
	looks := 0
	asleep := make(chan struct{})
	q.foundNothing = func() { // under q.mu, at each look that found nothing
		if looks++; looks == k.looks {
			close(asleep)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*hangBound) // bounds a hang
	t.Cleanup(cancel)
	got := make(chan error, 1)
	go func() { got <- k.deliver(ctx, q) }()
	select {
	case <-asleep:
	case err := <-got:
		t.Fatalf("the consumer returned (%v) instead of sleeping", err)
	case <-time.After(hangBound):
		t.Fatal("the consumer never slept")
	}
	return got
}

func heldNack(t *testing.T, q *Queue) func(time.Duration) error {
	var m *Message
	held(t, q, &m)
	return m.Nack
}

func heldNackID(t *testing.T, q *Queue) func(time.Duration) error {
	var m *Message
	held(t, q, &m)
	return func(d time.Duration) error { return q.NackID(m.ID, d) }
}

// heldNackAsync nacks with SettleAsync, whose group a consumer asleep
// does not wait to be written: the settle itself must wake it.
func heldNackAsync(t *testing.T, q *Queue) func(time.Duration) error {
	var m *Message
	held(t, q, &m)
	return func(d time.Duration) error {
		_, err := q.SettleAsync(Settlement{Receipt: m.Receipt, Op: SettleNack, Delay: d})
		return err
	}
}

func pulledNack(t *testing.T, q *Queue) func(time.Duration) error {
	s := &Sorted[int64]{q: q}
	require.NoError(t, s.Publish(context.Background(), 1, "k", []byte("v")))
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	return bs[0].Nack
}
