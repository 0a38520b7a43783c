package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestDeliveryLimitAtDelivery: a ready message that has had MaxDeliveries
// is dead-lettered when a delivery would take it, not delivered once more:
// after an open that applied no limit ended its lease, and after the
// application lowered its limit. The message behind it is delivered.
func TestDeliveryLimitAtDelivery(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before int // MaxDeliveries of the opens that deliver it 3 times
		tool   bool
	}{
		{name: "open without limit after a crash", before: 3, tool: true},
		{name: "limit lowered", before: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			o := &queue.Options{MaxDeliveries: tc.before, AckTimeout: time.Minute, ManualRequeue: true}
			q, err := queue.Open(dir, o)
			require.NoError(t, err)
			_, err = q.Enqueue(ctx, []byte("poison"), queue.WithID("poison"))
			require.NoError(t, err)
			_, err = q.Enqueue(ctx, []byte("next"), queue.WithID("next"))
			require.NoError(t, err)
			for range 2 {
				m, err := q.TryDequeue()
				require.NoError(t, err)
				require.NoError(t, m.Nack(0))
			}
			m, err := q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, 3, m.Deliveries)
			if tc.tool {
				m, err := q.TryDequeue() // "next", given back: ready
				require.NoError(t, err)
				require.NoError(t, m.Nack(0))
				image := crashImage(t, dir)
				require.NoError(t, q.Close())
				dir = image
				tool, err := queue.Open(dir, &queue.Options{MaxDeliveries: -1})
				require.NoError(t, err)
				require.Equal(t, 1, tool.Recovery().Requeued)
				require.Equal(t, 0, tool.Recovery().DeadOnOpen)
				require.NoError(t, tool.Close())
			} else {
				require.NoError(t, m.Nack(0))
				require.NoError(t, q.Close())
			}

			q, err = queue.Open(dir, &queue.Options{MaxDeliveries: 3, AckTimeout: time.Minute, ManualRequeue: true})
			require.NoError(t, err)
			defer q.Close()
			m, err = q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, "next", m.ID, "the message with 3 deliveries of 3 was delivered again")
			dead, err := q.DeadLetters(0, 0)
			require.NoError(t, err)
			require.Len(t, dead, 1)
			require.Equal(t, "poison", dead[0].ID)
			require.Equal(t, 3, dead[0].Deliveries)
			require.Equal(t, "3 deliveries, limit 3; not delivered again", dead[0].Reason)
			_, err = q.TryDequeue()
			require.ErrorIs(t, err, queue.ErrEmpty)
		})
	}
}

// TestDeliveryLimitAtPull is TestDeliveryLimitAtDelivery for a sorted
// queue: a pending value that has had MaxDeliveries is dead-lettered when
// a pull would take its key, with its delivery count; the key's other
// value is pulled, with its own count.
func TestDeliveryLimitAtPull(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before int
		tool   bool
	}{
		{name: "open without limit after a crash", before: 3, tool: true},
		{name: "limit lowered", before: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			o := func(max int) *queue.SortedOptions {
				return &queue.SortedOptions{Options: queue.Options{MaxDeliveries: max, AckTimeout: time.Minute, ManualRequeue: true}}
			}
			s, err := queue.OpenSorted[int64](dir, o(tc.before))
			require.NoError(t, err)
			require.NoError(t, s.Publish(ctx, 1, "k", []byte("poison")))
			for range 2 {
				bs, err := s.TryPull(10)
				require.NoError(t, err)
				require.NoError(t, bs[0].Nack(0))
			}
			bs, err := s.TryPull(10)
			require.NoError(t, err)
			require.Equal(t, 3, bs[0].Values[0].Deliveries)
			require.NoError(t, s.Publish(ctx, 2, "k", []byte("fresh")))
			if tc.tool {
				image := crashImage(t, dir)
				require.NoError(t, s.Close())
				dir = image
				tool, err := queue.OpenSorted[int64](dir, o(-1))
				require.NoError(t, err)
				require.Equal(t, 1, tool.Recovery().Requeued)
				require.NoError(t, tool.Close())
			} else {
				require.NoError(t, bs[0].Nack(0))
				require.NoError(t, s.Close())
			}

			s, err = queue.OpenSorted[int64](dir, o(3))
			require.NoError(t, err)
			defer s.Close()
			bs, err = s.TryPull(10)
			require.NoError(t, err)
			require.Len(t, bs, 1)
			require.Len(t, bs[0].Values, 1, "the value with 3 deliveries of 3 was pulled again")
			require.Equal(t, "fresh", string(bs[0].Values[0].Payload))
			require.Equal(t, 1, bs[0].Values[0].Deliveries)
			dead, err := s.DeadValues(0, 0)
			require.NoError(t, err)
			require.Len(t, dead, 1)
			require.Equal(t, "poison", string(dead[0].Payload))
			require.Equal(t, 3, dead[0].Deliveries)
			require.Equal(t, "3 deliveries, limit 3; not delivered again", dead[0].Reason)
			require.NoError(t, bs[0].Ack())
			require.NoError(t, s.Close())

			s, err = queue.OpenSorted[int64](dir, o(3)) // the dead-lettering replays
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, s.Close()) })
			dead, err = s.DeadValues(0, 0)
			require.NoError(t, err)
			require.Len(t, dead, 1)
			_, err = s.TryPull(10)
			require.ErrorIs(t, err, queue.ErrEmpty)
		})
	}
}

// A negative MaxDeliveries means no limit, as Options says: a message
// nacked, expired and left by crashes far more often than the default
// limit of 10 is delivered again each time, never dead-lettered; so is a
// sorted batch's value.
func TestNoDeliveryLimit(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	o := queue.Options{MaxDeliveries: -1, Clock: clk, AckTimeout: time.Minute, ManualRequeue: true}
	dir := t.TempDir()
	q, err := queue.Open(dir, &o)
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("poison"))
	require.NoError(t, err)
	for i := range 30 {
		m, err := q.TryDequeue()
		require.NoError(t, err, "delivery %d", i+1)
		require.Equal(t, i+1, m.Deliveries)
		switch i % 3 {
		case 0:
			require.NoError(t, m.Nack(0))
		case 1:
			clk.Advance(time.Minute)
			_, err := q.RequeueExpired()
			require.NoError(t, err)
		case 2:
			img := crashImage(t, dir)
			require.NoError(t, q.Close())
			dir = img
			q, err = queue.Open(dir, &o)
			require.NoError(t, err)
			require.Zero(t, q.Recovery().DeadOnOpen)
		}
	}
	require.Zero(t, q.Stats().Dead)
	require.NoError(t, q.Close())

	s, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{Options: o})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "k", []byte("poison")))
	for i := range 30 {
		bs, err := s.TryPull(10)
		require.NoError(t, err, "pull %d", i+1)
		require.Len(t, bs, 1)
		require.NoError(t, bs[0].Nack(0))
	}
	require.Zero(t, s.Stats().SortedDead)
}
