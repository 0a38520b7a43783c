package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/queue"
)

// A batch's receipt, as a string, lets another process settle the batch
// through the queue after a clean Close, before its deadline, as the
// README says: an ack removes the values, a nack returns them, an extend
// keeps them leased past the first deadline, a dead-letter moves them to
// the dead set.
func TestSortedReceiptInNextProcess(t *testing.T) {
	ctx := context.Background()
	for name, c := range map[string]struct {
		settle func(s *queue.Sorted[int64], r queue.BatchReceipt) error
		check  func(t *testing.T, s *queue.Sorted[int64], clk *fakeclock.Clock)
	}{
		"Ack": {
			func(s *queue.Sorted[int64], r queue.BatchReceipt) error { return s.Ack(r) },
			func(t *testing.T, s *queue.Sorted[int64], _ *fakeclock.Clock) {
				st := s.Stats()
				require.Zero(t, st.SortedPending+st.SortedLeased+st.SortedDead, "%+v", st)
			},
		},
		"Nack": {
			func(s *queue.Sorted[int64], r queue.BatchReceipt) error { return s.Nack(r, 0) },
			func(t *testing.T, s *queue.Sorted[int64], _ *fakeclock.Clock) {
				bs, err := s.TryPull(10)
				require.NoError(t, err)
				require.Len(t, bs, 1)
				require.Equal(t, []string{"a", "b"}, payloads(bs[0]))
				require.Equal(t, 2, bs[0].Values[0].Deliveries)
			},
		},
		"Extend": {
			func(s *queue.Sorted[int64], r queue.BatchReceipt) error { return s.Extend(r, time.Hour) },
			func(t *testing.T, s *queue.Sorted[int64], clk *fakeclock.Clock) {
				clk.Advance(time.Minute) // past the first deadline
				n, err := s.RequeueExpired()
				require.NoError(t, err)
				require.Zero(t, n, "the extended lease still runs")
				require.Equal(t, 2, s.Stats().SortedLeased)
			},
		},
		"DeadLetter": {
			func(s *queue.Sorted[int64], r queue.BatchReceipt) error { return s.DeadLetter(r, "poison") },
			func(t *testing.T, s *queue.Sorted[int64], _ *fakeclock.Clock) {
				ds, err := s.DeadValues(0, 0)
				require.NoError(t, err)
				require.Len(t, ds, 2)
				require.Equal(t, "poison", ds[0].Reason)
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			clk := newFakeClock()
			dir := t.TempDir()
			o := &queue.SortedOptions{Options: queue.Options{Clock: clk, AckTimeout: time.Minute, ManualRequeue: true}}
			s, err := queue.OpenSorted[int64](dir, o)
			require.NoError(t, err)
			require.NoError(t, s.Publish(ctx, 1, "k", []byte("a")))
			require.NoError(t, s.Publish(ctx, 2, "k", []byte("b")))
			bs, err := s.TryPull(10)
			require.NoError(t, err)
			require.Len(t, bs, 1)
			receipt := bs[0].Receipt.String()
			require.NoError(t, s.Close())

			clk.Advance(time.Minute - time.Nanosecond)
			s, err = queue.OpenSorted[int64](dir, o)
			require.NoError(t, err)
			defer s.Close()
			r, err := queue.ParseBatchReceipt(receipt)
			require.NoError(t, err)
			require.NoError(t, c.settle(s, r), "a nanosecond before the deadline, in the next process")
			c.check(t, s, clk)
		})
	}
}
