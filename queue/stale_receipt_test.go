package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// staleSettles are every call that settles by receipt.
var staleSettles = []struct {
	name string
	do   func(q *queue.Queue, r queue.Receipt) error
}{
	{"Ack", func(q *queue.Queue, r queue.Receipt) error { return q.Ack(r) }},
	{"Nack", func(q *queue.Queue, r queue.Receipt) error { return q.Nack(r, 0) }},
	{"Extend", func(q *queue.Queue, r queue.Receipt) error { return q.Extend(r, time.Hour) }},
	{"DeadLetter", func(q *queue.Queue, r queue.Receipt) error { return q.DeadLetter(r, "stale") }},
	{"AckBatch", func(q *queue.Queue, r queue.Receipt) error { return q.AckBatch(r) }},
	{"NackBatch", func(q *queue.Queue, r queue.Receipt) error { return q.NackBatch(0, r) }},
	{"ExtendBatch", func(q *queue.Queue, r queue.Receipt) error { return q.ExtendBatch(time.Hour, r) }},
	{"AckAsync", func(q *queue.Queue, r queue.Receipt) error { return asyncOutcome(q.AckAsync(r)) }},
	{"Settle/ack", settleBy(queue.SettleAck, false)},
	{"Settle/nack", settleBy(queue.SettleNack, false)},
	{"Settle/extend", settleBy(queue.SettleExtend, false)},
	{"Settle/dead", settleBy(queue.SettleDeadLetter, false)},
	{"SettleAsync/ack", settleBy(queue.SettleAck, true)},
	{"SettleAsync/nack", settleBy(queue.SettleNack, true)},
	{"SettleAsync/extend", settleBy(queue.SettleExtend, true)},
	{"SettleAsync/dead", settleBy(queue.SettleDeadLetter, true)},
}

func settleBy(op queue.SettleOp, async bool) func(q *queue.Queue, r queue.Receipt) error {
	return func(q *queue.Queue, r queue.Receipt) error {
		s := queue.Settlement{Receipt: r, Op: op, Delay: time.Hour, Reason: "stale"}
		if op == queue.SettleNack {
			s.Delay = 0
		}
		if async {
			return asyncOutcome(q.SettleAsync(s))
		}
		return q.Settle(s)
	}
}

// asyncOutcome is the error of an asynchronous settle: the refusal, or
// the Pending's outcome.
func asyncOutcome(p *queue.Pending, err error) error {
	if err != nil {
		if p != nil {
			return fmt.Errorf("a Pending beside the refusal %w", err)
		}
		return err
	}
	return p.Wait(context.Background())
}

// TestStaleReceiptRefusedEverywhere: the receipt of a delivery whose lease
// ended (ran out and redelivered, in the same process, across a clean
// reopen or a crash, with the message copied forward meanwhile, or acked
// by the delivery after it) is refused with ErrLeaseLost by every call
// that settles by receipt, writes nothing, and leaves the message to its
// current delivery, which then acks it.
func TestStaleReceiptRefusedEverywhere(t *testing.T) {
	ctx := context.Background()
	for _, sc := range []string{"redelivered", "clean reopen", "crash", "copied forward", "acked since"} {
		for _, s := range staleSettles {
			t.Run(sc+"/"+s.name, func(t *testing.T) {
				clk := newFakeClock()
				dir := t.TempDir()
				o := &queue.Options{Clock: clk, AckTimeout: time.Minute, SegmentSize: 4096}
				q := open(t, dir, o)
				enqueue(t, q, "stale")
				stale := tryDequeue(t, q)
				switch sc {
				case "clean reopen":
					require.NoError(t, q.Close())
					q = open(t, dir, o)
				case "crash":
					img := crashImage(t, dir)
					require.NoError(t, q.Close())
					q = open(t, img, o)
				}
				defer q.Close()
				clk.Advance(2 * time.Minute)
				_, err := q.RequeueExpired()
				require.NoError(t, err)
				now := tryDequeue(t, q)
				require.Equal(t, stale.ID, now.ID)
				switch sc {
				case "copied forward":
					for range 100 {
						_, err := q.Enqueue(ctx, make([]byte, 100))
						require.NoError(t, err)
						m := tryDequeue(t, q)
						require.NoError(t, m.Ack())
					}
					require.NoError(t, q.Compact())
					require.Positive(t, q.Stats().Moved, "the compaction copied the message forward")
				case "acked since":
					require.NoError(t, now.Ack())
				}
				before := q.Stats().LastLSN
				require.ErrorIs(t, s.do(q, stale.Receipt), queue.ErrLeaseLost)
				require.Equal(t, before, q.Stats().LastLSN, "nothing written for the stale receipt")
				if sc != "acked since" {
					require.NoError(t, now.Ack(), "the current delivery still owns the message")
				}
				requireEmpty(t, q)
			})
		}
	}
}

// TestStaleBatchReceiptRefusedEverywhere is TestStaleReceiptRefusedEverywhere
// for a sorted queue's batches.
func TestStaleBatchReceiptRefusedEverywhere(t *testing.T) {
	ctx := context.Background()
	calls := []struct {
		name string
		do   func(s *queue.Sorted[int64], r queue.BatchReceipt) error
	}{
		{"Ack", func(s *queue.Sorted[int64], r queue.BatchReceipt) error { return s.Ack(r) }},
		{"Nack", func(s *queue.Sorted[int64], r queue.BatchReceipt) error { return s.Nack(r, 0) }},
		{"Extend", func(s *queue.Sorted[int64], r queue.BatchReceipt) error { return s.Extend(r, time.Hour) }},
		{"DeadLetter", func(s *queue.Sorted[int64], r queue.BatchReceipt) error { return s.DeadLetter(r, "stale") }},
	}
	pull := func(t *testing.T, s *queue.Sorted[int64]) *queue.Batch[int64] {
		t.Helper()
		bs, err := s.TryPull(10)
		require.NoError(t, err)
		require.Len(t, bs, 1)
		return bs[0]
	}
	for _, sc := range []string{"redelivered", "clean reopen", "crash", "copied forward", "acked since"} {
		for _, c := range calls {
			t.Run(sc+"/"+c.name, func(t *testing.T) {
				clk := newFakeClock()
				dir := t.TempDir()
				so := &queue.SortedOptions{Options: queue.Options{Clock: clk, AckTimeout: time.Minute, SegmentSize: 4096}}
				s, err := queue.OpenSorted[int64](dir, so)
				require.NoError(t, err)
				require.NoError(t, s.Publish(ctx, 1, "stale", []byte("v")))
				stale := pull(t, s)
				switch sc {
				case "clean reopen":
					require.NoError(t, s.Close())
					s, err = queue.OpenSorted[int64](dir, so)
					require.NoError(t, err)
				case "crash":
					img := crashImage(t, dir)
					require.NoError(t, s.Close())
					s, err = queue.OpenSorted[int64](img, so)
					require.NoError(t, err)
				}
				defer s.Close()
				clk.Advance(2 * time.Minute)
				_, err = s.RequeueExpired()
				require.NoError(t, err)
				now := pull(t, s)
				require.Equal(t, stale.Key, now.Key)
				switch sc {
				case "copied forward":
					for i := range 100 {
						require.NoError(t, s.Publish(ctx, int64(i+2), "other", make([]byte, 100)))
						require.NoError(t, pull(t, s).Ack())
					}
					require.NoError(t, s.Compact())
					require.Positive(t, s.Stats().Moved, "the compaction copied the value forward")
				case "acked since":
					require.NoError(t, now.Ack())
				}
				before := s.Stats().LastLSN
				require.ErrorIs(t, c.do(s, stale.Receipt), queue.ErrLeaseLost)
				require.Equal(t, before, s.Stats().LastLSN, "nothing written for the stale receipt")
				if sc != "acked since" {
					require.NoError(t, now.Ack(), "the current pull still owns the batch")
				}
				_, err = s.TryPull(10)
				require.ErrorIs(t, err, queue.ErrEmpty)
			})
		}
	}
}
