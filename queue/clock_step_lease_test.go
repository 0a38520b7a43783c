package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// A lease's deadline is a time of the clock: a step of the clock back
// lengthens a running lease by the step, a step forward shortens it by
// the step, in the live queue and after a clean reopen (doc.go). A
// receipt is good until a nanosecond before the moved end, refused at it.
func TestClockStepMovesLeaseEnd(t *testing.T) {
	const timeout = time.Minute
	for _, reopen := range []bool{false, true} {
		for _, step := range []time.Duration{-20 * time.Second, 20 * time.Second} {
			name := map[bool]string{false: "live", true: "reopened"}[reopen] + "/" + step.String()
			t.Run("message/"+name, func(t *testing.T) {
				clk := newFakeClock()
				dir := t.TempDir()
				o := &queue.Options{Clock: clk, AckTimeout: timeout, ManualRequeue: true}
				q := open(t, dir, o)
				enqueue(t, q, "a")
				enqueue(t, q, "b")
				a, b := tryDequeue(t, q), tryDequeue(t, q)
				if reopen {
					require.NoError(t, q.Close())
					q = open(t, dir, o)
				}
				defer q.Close()
				clk.Advance(step)
				clk.Advance(timeout - step - time.Nanosecond)
				n, err := q.RequeueExpired()
				require.NoError(t, err)
				require.Zero(t, n, "no lease ends before its moved end")
				require.NoError(t, q.Ack(a.Receipt), "a nanosecond before the moved end")
				clk.Advance(time.Nanosecond)
				require.ErrorIs(t, q.Ack(b.Receipt), queue.ErrLeaseLost, "at the moved end")
			})
			t.Run("batch/"+name, func(t *testing.T) {
				clk := newFakeClock()
				dir := t.TempDir()
				o := &queue.SortedOptions{Options: queue.Options{Clock: clk, AckTimeout: timeout, ManualRequeue: true}}
				s, err := queue.OpenSorted[int](dir, o)
				require.NoError(t, err)
				ctx := context.Background()
				require.NoError(t, s.Publish(ctx, 1, "a", []byte("a")))
				require.NoError(t, s.Publish(ctx, 2, "b", []byte("b")))
				bs, err := s.TryPull(2)
				require.NoError(t, err)
				require.Len(t, bs, 2)
				if reopen {
					require.NoError(t, s.Close())
					s, err = queue.OpenSorted[int](dir, o)
					require.NoError(t, err)
				}
				defer s.Close()
				clk.Advance(step)
				clk.Advance(timeout - step - time.Nanosecond)
				n, err := s.RequeueExpired()
				require.NoError(t, err)
				require.Zero(t, n, "no lease ends before its moved end")
				require.NoError(t, s.Ack(bs[0].Receipt), "a nanosecond before the moved end")
				clk.Advance(time.Nanosecond)
				require.ErrorIs(t, s.Ack(bs[1].Receipt), queue.ErrLeaseLost, "at the moved end")
			})
		}
	}
}

// A windowed key whose window had closed and that was not pulled since is
// held again by a step back of the clock, until the window closes by the
// new clock, live and after a clean reopen (doc.go).
func TestClockStepBackHoldsClosedWindow(t *testing.T) {
	const window = 20 * time.Second
	for _, reopen := range []bool{false, true} {
		t.Run(map[bool]string{false: "live", true: "reopened"}[reopen], func(t *testing.T) {
			clk := newFakeClock()
			dir := t.TempDir()
			o := &queue.WindowOptions{Window: window}
			o.Clock, o.ManualRequeue = clk, true
			w, err := queue.OpenWindowed(dir, o)
			require.NoError(t, err)
			require.NoError(t, w.Publish(context.Background(), "k", []byte("v")))
			clk.Advance(window + 5*time.Second)
			if reopen {
				require.NoError(t, w.Close())
				w, err = queue.OpenWindowed(dir, o)
				require.NoError(t, err)
			}
			defer w.Close()
			clk.Advance(-6 * time.Second)
			_, err = w.TryPull(10)
			require.ErrorIs(t, err, queue.ErrEmpty, "a second short of the window by the stepped clock")
			clk.Advance(time.Second)
			bs, err := w.TryPull(10)
			require.NoError(t, err, "the window closes again by the new clock")
			require.Equal(t, "k", bs[0].Key)
		})
	}
}
