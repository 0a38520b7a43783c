package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// A nack's delay holds back the values it puts back. When MaxDeliveries
// sent every value of the batch to the dead set, nothing was put back,
// and the key's hold kept a value published to the key afterwards from
// being pulled until the delay had passed, across a reopen too, though
// that value was never delivered.
func TestNackHoldEndsWithItsValues(t *testing.T) {
	dir := t.TempDir()
	o := &queue.SortedOptions{Options: queue.Options{MaxDeliveries: 1}}
	s, err := queue.OpenSorted[int64](dir, o)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Publish(ctx, 1, "k", []byte("poison")))
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.NoError(t, bs[0].Nack(time.Hour))
	ds, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 1, "the nacked value went dead")
	require.NoError(t, s.Publish(ctx, 2, "k", []byte("fresh")))

	crashed := crashImage(t, dir) // the nack's record is replayed from the log
	pullFresh := func(s *queue.Sorted[int64]) {
		t.Helper()
		bs, err := s.TryPull(10)
		require.NoError(t, err, "the fresh value is held back by the dead batch's nack")
		require.Len(t, bs, 1)
		require.Equal(t, [][]byte{[]byte("fresh")}, bs[0].Payloads())
		require.NoError(t, bs[0].Ack())
	}
	pullFresh(s)
	require.NoError(t, s.Close())
	s, err = queue.OpenSorted[int64](crashed, o)
	require.NoError(t, err)
	defer s.Close()
	pullFresh(s) // the replay holds it back no more than the live queue did
}

// A nack's hold was ended for good by the first pull (or Stats) at or
// after its time, whatever key that pull took, while a replay of the log
// set every hold again from the nacks' records and ended none at the
// pulls. After a crash and a step back of the clock (NTP, a clock set by
// hand) the two disagreed: a key the live queue had pulled since its hold
// ended, or had released, was held again until the nack's time came round
// once more by the new clock. A hold now ends when its key is pulled (or
// has no value left), and is otherwise judged by the clock at each pull,
// so the live queue and its replay hold the same keys back.
func TestNackHoldAfterClockStepsBackSurvivesReplay(t *testing.T) {
	for _, c := range []struct {
		name       string
		held, next int64 // sort keys of the nacked key and of the other key
		heldBack   bool  // the nacked key is held after the clock stepped back
	}{
		{"the held key pulled since", 1, 2, false},
		{"another key pulled since", 5, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			clk := newFakeClock()
			o := &queue.SortedOptions{Options: queue.Options{Clock: clk, ManualRequeue: true}}
			s, err := queue.OpenSorted[int64](dir, o)
			require.NoError(t, err)
			defer s.Close()
			ctx := context.Background()
			require.NoError(t, s.Publish(ctx, c.held, "held", []byte("h1")))
			bs, err := s.TryPull(1)
			require.NoError(t, err)
			require.Equal(t, "held", bs[0].Key)
			require.NoError(t, bs[0].Nack(10*time.Second)) // held until 10 s from now
			require.NoError(t, s.Publish(ctx, c.next, "next", []byte("n1")))
			clk.Advance(10 * time.Second)
			bs, err = s.TryPull(1) // the hold's time has come
			require.NoError(t, err)
			require.Len(t, bs, 1)
			require.NoError(t, bs[0].Ack())
			clk.Advance(-time.Hour) // the clock steps back
			require.NoError(t, s.Publish(ctx, 0, "held", []byte("h2")))

			crashed := crashImage(t, dir)
			pull := func(s *queue.Sorted[int64]) string {
				t.Helper()
				bs, err := s.TryPull(1)
				if c.heldBack {
					require.ErrorIs(t, err, queue.ErrEmpty, "the key's hold is an hour away by the stepped clock")
					return ""
				}
				require.NoError(t, err, "the key's hold ended when it was pulled")
				return bs[0].Key
			}
			live := pull(s)
			if !c.heldBack {
				require.Equal(t, "held", live)
			}
			require.NoError(t, s.Close())
			s, err = queue.OpenSorted[int64](crashed, o)
			require.NoError(t, err)
			defer s.Close()
			require.Equal(t, live, pull(s), "the replay holds back what the live queue held back")
			if c.heldBack {
				clk.Advance(time.Hour) // the hold's time comes again
				bs, err := s.TryPull(1)
				require.NoError(t, err)
				require.Equal(t, "held", bs[0].Key)
			}
		})
	}
}
