package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// settles are the four ways a consumer settles a delivery.
var settles = []struct {
	name string
	do   func(m *queue.Message) error
}{
	{"ack", func(m *queue.Message) error { return m.Ack() }},
	{"nack", func(m *queue.Message) error { return m.Nack(0) }},
	{"extend", func(m *queue.Message) error { return m.Extend(time.Minute) }},
	{"dead-letter", func(m *queue.Message) error { return m.DeadLetter("poison") }},
}

// TestSettleAfterDeadlineIsFenced: a receipt whose lease ran out fails
// with ErrLeaseLost although no requeue has run (ManualRequeue), and the
// message stays in flight until one does, then is delivered again. Just
// before the deadline the same settle succeeds.
func TestSettleAfterDeadlineIsFenced(t *testing.T) {
	for _, s := range settles {
		t.Run(s.name, func(t *testing.T) {
			clk := newFakeClock()
			q := open(t, t.TempDir(), &queue.Options{Clock: clk, AckTimeout: time.Minute, ManualRequeue: true})
			defer q.Close()
			enqueue(t, q, "a")
			enqueue(t, q, "b")
			early, late := tryDequeue(t, q), tryDequeue(t, q)

			clk.Advance(time.Minute - time.Nanosecond)
			require.NoError(t, s.do(early), "a nanosecond before the deadline")
			clk.Advance(time.Nanosecond)
			before := q.Stats()
			require.ErrorIs(t, s.do(late), queue.ErrLeaseLost, "at the deadline, before any requeue")
			after := q.Stats()
			require.Equal(t, before.LastLSN, after.LastLSN, "nothing written for the late receipt")
			require.Equal(t, before.InFlight, after.InFlight, "in flight until a requeue runs")

			_, err := q.RequeueExpired()
			require.NoError(t, err)
			for {
				again := tryDequeue(t, q)
				if again.ID == late.ID {
					require.Equal(t, 2, again.Deliveries)
					return
				}
			}
		})
	}
}

// TestSettleAfterDeadlineInNextProcess: a lease still running at a clean
// Close keeps running in the next process; once its deadline passed, the
// next process refuses its receipt, whether its own requeue has run
// (automatic) or not (manual).
func TestSettleAfterDeadlineInNextProcess(t *testing.T) {
	for _, manual := range []bool{true, false} {
		for _, s := range settles {
			t.Run(s.name+map[bool]string{true: "/manual", false: "/automatic"}[manual], func(t *testing.T) {
				clk := newFakeClock()
				dir := t.TempDir()
				o := &queue.Options{Clock: clk, AckTimeout: time.Minute, ManualRequeue: manual}
				q := open(t, dir, o)
				enqueue(t, q, "a")
				m := tryDequeue(t, q)
				require.NoError(t, q.Close())

				clk.Advance(2 * time.Minute)
				q = open(t, dir, o)
				defer q.Close()
				var err error
				switch s.name {
				case "ack":
					err = q.Ack(m.Receipt)
				case "nack":
					err = q.Nack(m.Receipt, 0)
				case "extend":
					err = q.Extend(m.Receipt, time.Minute)
				case "dead-letter":
					err = q.DeadLetter(m.Receipt, "poison")
				}
				require.ErrorIs(t, err, queue.ErrLeaseLost)
				_, err = q.RequeueExpired()
				require.NoError(t, err)
				again := tryDequeue(t, q)
				require.Equal(t, m.ID, again.ID)
				require.NoError(t, again.Ack())
			})
		}
	}
}

// TestSortedBatchAfterDeadlineIsFenced is TestSettleAfterDeadlineIsFenced
// for a sorted queue's batches.
func TestSortedBatchAfterDeadlineIsFenced(t *testing.T) {
	settleBatch := []struct {
		name string
		do   func(b *queue.Batch[int]) error
	}{
		{"ack", func(b *queue.Batch[int]) error { return b.Ack() }},
		{"nack", func(b *queue.Batch[int]) error { return b.Nack(0) }},
		{"extend", func(b *queue.Batch[int]) error { return b.Extend(time.Minute) }},
		{"dead-letter", func(b *queue.Batch[int]) error { return b.DeadLetter("poison") }},
	}
	for _, s := range settleBatch {
		t.Run(s.name, func(t *testing.T) {
			clk := newFakeClock()
			o := &queue.SortedOptions{Options: queue.Options{Clock: clk, AckTimeout: time.Minute, ManualRequeue: true}}
			sq, err := queue.OpenSorted[int](t.TempDir(), o)
			require.NoError(t, err)
			defer sq.Close()
			ctx := context.Background()
			require.NoError(t, sq.Publish(ctx, 1, "early", []byte("e")))
			require.NoError(t, sq.Publish(ctx, 2, "late", []byte("l")))
			bs, err := sq.TryPull(2)
			require.NoError(t, err)
			require.Len(t, bs, 2)

			clk.Advance(time.Minute - time.Nanosecond)
			require.NoError(t, s.do(bs[0]), "a nanosecond before the deadline")
			clk.Advance(time.Nanosecond)
			require.ErrorIs(t, s.do(bs[1]), queue.ErrLeaseLost, "at the deadline, before any requeue")

			n, err := sq.RequeueExpired()
			require.NoError(t, err)
			require.GreaterOrEqual(t, n, 1)
			again, err := sq.TryPull(10)
			require.NoError(t, err)
			keys := []string{}
			for _, b := range again {
				keys = append(keys, b.Key)
			}
			require.Contains(t, keys, "late", "the late batch's values are back")
		})
	}
}

// TestAckBeforeDeadlineReplaysAfterIt: an ack written a nanosecond before
// the deadline, replayed by a process whose clock is far past it, stays
// an ack: replay applies what was written and does not judge it again.
func TestAckBeforeDeadlineReplaysAfterIt(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	o := &queue.Options{Clock: clk, AckTimeout: time.Minute, ManualRequeue: true}
	q := open(t, dir, o)
	defer q.Close()
	enqueue(t, q, "a")
	enqueue(t, q, "b")
	acked, nacked := tryDequeue(t, q), tryDequeue(t, q)
	clk.Advance(time.Minute - time.Nanosecond)
	require.NoError(t, acked.Ack())
	require.NoError(t, nacked.Nack(time.Hour))
	img := crashImage(t, dir) // the process dies here

	clk.Advance(time.Hour + time.Minute)
	q2 := open(t, img, o)
	defer q2.Close()
	st := q2.Stats()
	require.EqualValues(t, 1, st.Acked)
	require.EqualValues(t, 1, st.Nacked)
	require.EqualValues(t, 0, st.InFlight+st.Dead)
	again := tryDequeue(t, q2)
	require.Equal(t, nacked.ID, again.ID, "only the nacked message comes back")
	require.Equal(t, 2, again.Deliveries)
	requireEmpty(t, q2)
}
