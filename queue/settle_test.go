package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
)

// dequeueN leases n messages, one by one.
func dequeueN(t *testing.T, q *queue.Queue, n int) queue.Messages {
	t.Helper()
	ms := make(queue.Messages, n)
	for i := range ms {
		ms[i] = tryDequeue(t, q)
	}
	return ms
}

// A batch ack checks every receipt on its own: the stale and unknown ones
// are refused with ErrLeaseLost at their index, the others are acked.
func TestAckBatchPerReceiptOutcomes(t *testing.T) {
	q := open(t, t.TempDir(), nil)
	defer q.Close()
	for _, p := range []string{"a", "b", "c", "d"} {
		enqueue(t, q, p)
	}
	ms := dequeueN(t, q, 4)
	require.NoError(t, ms[1].Ack()) // its receipt is now stale
	rs := append(ms.Receipts(), queue.Receipt{Seq: 999, Lease: 1000})

	err := q.AckBatch(rs...)
	var be *queue.BatchError
	require.ErrorAs(t, err, &be)
	require.Len(t, be.Errs, 5)
	for i, want := range []bool{false, true, false, false, true} {
		if want {
			require.ErrorIs(t, be.Errs[i], queue.ErrLeaseLost, "receipt %d", i)
		} else {
			require.NoError(t, be.Errs[i], "receipt %d", i)
		}
	}
	require.ErrorIs(t, err, queue.ErrLeaseLost)
	require.Contains(t, err.Error(), "2 of 5")
	require.Contains(t, err.Error(), "[1] ")
	require.Contains(t, err.Error(), "[4] ")
	requireEmpty(t, q)
	require.EqualValues(t, 4, q.Stats().Acked)
	require.Zero(t, q.Stats().InFlight)
}

// Settle applies each kind in order, as one-by-one calls would.
func TestSettleMixed(t *testing.T) {
	clk := newFakeClock()
	q := open(t, t.TempDir(), &queue.Options{Clock: clk, AckTimeout: time.Minute, ManualRequeue: true})
	defer q.Close()
	for _, p := range []string{"ack", "nack", "extend", "dead", "bad"} {
		enqueue(t, q, p)
	}
	ms := dequeueN(t, q, 5)
	err := q.Settle(
		queue.Settlement{Receipt: ms[0].Receipt, Op: queue.SettleAck},
		queue.Settlement{Receipt: ms[1].Receipt, Op: queue.SettleNack, Delay: 10 * time.Second},
		queue.Settlement{Receipt: ms[2].Receipt, Op: queue.SettleExtend, Delay: 5 * time.Minute},
		queue.Settlement{Receipt: ms[3].Receipt, Op: queue.SettleDeadLetter, Reason: "why"},
		queue.Settlement{Receipt: ms[4].Receipt, Op: queue.SettleExtend}, // no length: refused
		queue.Settlement{Receipt: ms[0].Receipt, Op: queue.SettleAck},    // acked above: refused
	)
	var be *queue.BatchError
	require.ErrorAs(t, err, &be)
	require.ErrorIs(t, be.Errs[4], queue.ErrInvalidOptions)
	require.ErrorIs(t, be.Errs[5], queue.ErrLeaseLost)
	for i := 0; i < 4; i++ {
		require.NoError(t, be.Errs[i])
	}

	st := q.Stats()
	require.EqualValues(t, 1, st.Acked)
	require.EqualValues(t, 1, st.Delayed)
	require.EqualValues(t, 1, st.Dead)
	require.EqualValues(t, 2, st.InFlight) // extended, and the refused one
	dead, err := q.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "why", dead[0].Reason)

	clk.Advance(2 * time.Minute) // past the default lease, within the extension
	n, err := q.RequeueExpired()
	require.NoError(t, err)
	require.Equal(t, 1, n) // only the refused extension ran out
	m := tryDequeue(t, q)
	require.ElementsMatch(t, []string{"nack", "bad"}, []string{string(m.Payload), string(tryDequeue(t, q).Payload)})
	require.NoError(t, ms[2].Ack())
}

// The messages of a DequeueBatch settle together, also on a Typed view.
func TestMessagesSettle(t *testing.T) {
	q := open(t, t.TempDir(), nil)
	defer q.Close()
	jobs := queue.NewTyped[int](q)
	ctx := context.Background()
	for i := range 6 {
		_, err := jobs.Enqueue(ctx, i)
		require.NoError(t, err)
	}
	vs, ms, err := jobs.DequeueBatch(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, []int{0, 1, 2}, vs)
	require.NoError(t, ms.Extend(time.Hour))
	require.NoError(t, ms.Nack(0))
	vs, ms, err = jobs.DequeueBatch(ctx, 10)
	require.NoError(t, err)
	require.ElementsMatch(t, []int{0, 1, 2, 3, 4, 5}, vs)
	require.NoError(t, ms.Ack())
	requireEmpty(t, q)
	require.EqualValues(t, 6, q.Stats().Acked)
	require.NoError(t, queue.Messages(nil).Ack())

	_, err = q.Enqueue(ctx, []byte{0xc1}) // not msgpack
	require.NoError(t, err)
	_, err = jobs.Enqueue(ctx, 7)
	require.NoError(t, err)
	vs, ms, err = jobs.DequeueBatch(ctx, 10)
	var be *queue.BatchError
	require.ErrorAs(t, err, &be)
	require.Error(t, be.Errs[0])
	require.NoError(t, be.Errs[1])
	require.Equal(t, []int{0, 7}, vs)
	require.Len(t, ms, 2)
}

// otherEngine is a Settler of an engine outside package queue that
// settles every delivery.
type otherEngine struct{}

func (otherEngine) Ack(queue.Receipt) error                         { return nil }
func (otherEngine) Nack(queue.Receipt, time.Duration) error         { return nil }
func (otherEngine) Extend(queue.Receipt, time.Duration) error       { return nil }
func (otherEngine) DeadLetter(r queue.Receipt, reason string) error { return nil }

// TestMessagesAckAsyncOtherEngine: only the embedded queue settles
// asynchronously. Messages of another engine (NewMessage) fail
// Messages.AckAsync as Message.AckAsync fails one of them, with
// errors.ErrUnsupported, not as messages of different queues.
func TestMessagesAckAsyncOtherEngine(t *testing.T) {
	m := queue.NewMessage(otherEngine{}, queue.Message{ID: "a", Receipt: queue.Receipt{Seq: 1, Lease: 2}})
	_, err := m.AckAsync()
	require.ErrorIs(t, err, errors.ErrUnsupported)
	for _, n := range []int{1, 2} {
		ms := make(queue.Messages, n)
		for i := range ms {
			ms[i] = m
		}
		p, err := ms.AckAsync()
		require.ErrorIs(t, err, errors.ErrUnsupported, "%d messages", n)
		require.NotErrorIs(t, err, queue.ErrInvalidOptions, "%d messages", n)
		require.Nil(t, p)
	}
}

// A settle survives a reopen (after a crash image too), and the refused
// settlement leaves its message as it was.
func TestSettleBatchSurvivesCrash(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, nil)
	defer q.Close()
	for range 10 {
		enqueue(t, q, "m")
	}
	ms := dequeueN(t, q, 10)
	require.NoError(t, ms[:7].Ack())
	img := crashImage(t, dir)
	q2 := open(t, img, nil)
	defer q2.Close()
	st := q2.Stats()
	require.EqualValues(t, 7, st.Acked)
	require.EqualValues(t, 3, st.Ready) // the process that leased them is gone
}

func TestSettleClosed(t *testing.T) {
	q := open(t, t.TempDir(), nil)
	enqueue(t, q, "a")
	m := tryDequeue(t, q)
	require.NoError(t, q.Close())
	require.ErrorIs(t, q.AckBatch(m.Receipt), queue.ErrClosed)
	_, err := q.SettleAsync(queue.Settlement{Receipt: m.Receipt, Op: queue.SettleAck})
	require.ErrorIs(t, err, queue.ErrClosed)
	require.False(t, errors.As(err, new(*queue.BatchError)))
}

// On a log poisoned by a failed write or fsync, a batch settle fails with
// that error, as the doc says, whatever its first settlement is: not with
// a bare ErrLeaseLost of a stale receipt, which, with no *BatchError to
// name it, reads as if the others had been applied.
func TestSettlePoisonedLog(t *testing.T) {
	// run opens a queue on a file system that fails its failAt-th
	// operation, leases three messages and acks the first (its receipt
	// is then stale), then makes an Enqueue (its error is returned); it
	// returns the queue, the deliveries and the operations counted before
	// the Enqueue.
	run := func(t *testing.T, failAt int) (*queue.Queue, queue.Messages, int, error) {
		fs := faultfs.New(failAt)
		q := open(t, t.TempDir(), &queue.Options{FS: fs, ManualRequeue: true})
		for _, p := range []string{"a", "b", "c"} {
			enqueue(t, q, p)
		}
		ms := dequeueN(t, q, 3)
		require.NoError(t, ms[0].Ack())
		before := len(fs.Ops())
		_, err := q.Enqueue(context.Background(), []byte("poison"))
		return q, ms, before, err
	}
	dry, _, before, err := run(t, 0)
	require.NoError(t, err)
	require.NoError(t, dry.Close())
	q, ms, _, err := run(t, before+1) // the Enqueue's first operation fails
	require.ErrorIs(t, err, faultfs.ErrInjected)
	defer q.Close()

	for _, c := range []struct {
		name   string
		settle func() error
	}{
		{"AckBatch", func() error { return q.AckBatch(ms[0].Receipt, ms[1].Receipt) }},
		{"Messages.Ack", func() error { return ms[:2].Ack() }},
		{"SettleAsync", func() error {
			p, err := q.SettleAsync(queue.Settlement{Receipt: ms[0].Receipt, Op: queue.SettleAck},
				queue.Settlement{Receipt: ms[2].Receipt, Op: queue.SettleNack})
			require.Nil(t, p, "nothing was applied")
			return err
		}},
	} {
		err := c.settle()
		require.ErrorIs(t, err, faultfs.ErrInjected, "%s: the error that poisoned the log", c.name)
		require.False(t, errors.As(err, new(*queue.BatchError)), "%s: no settlement was applied", c.name)
	}
}

// Settlements of one receipt in one call apply in order, each against the
// state the ones before it left: an extend and a nack apply, an ack after
// the nack is refused (the nack ended the lease), and so is a second nack.
// A reopen replays the call's records to the same state, after a crash
// (the image of a kill -9) as after a Close: the message is delayed by
// the nack, not leased, with its one delivery counted.
func TestSettleSameReceiptInOneCall(t *testing.T) {
	clk := newFakeClock()
	opts := &queue.Options{Clock: clk, AckTimeout: time.Minute, ManualRequeue: true}
	dir := t.TempDir()
	q := open(t, dir, opts)
	enqueue(t, q, "m")
	m := tryDequeue(t, q)
	err := q.Settle(
		queue.Settlement{Receipt: m.Receipt, Op: queue.SettleExtend, Delay: time.Hour},
		queue.Settlement{Receipt: m.Receipt, Op: queue.SettleNack, Delay: 10 * time.Second},
		queue.Settlement{Receipt: m.Receipt, Op: queue.SettleAck},
		queue.Settlement{Receipt: m.Receipt, Op: queue.SettleNack},
	)
	var be *queue.BatchError
	require.ErrorAs(t, err, &be)
	require.NoError(t, be.Errs[0], "extend")
	require.NoError(t, be.Errs[1], "nack")
	require.ErrorIs(t, be.Errs[2], queue.ErrLeaseLost, "ack after the nack")
	require.ErrorIs(t, be.Errs[3], queue.ErrLeaseLost, "second nack")

	st := q.Stats()
	require.EqualValues(t, 1, st.Delayed)
	require.Zero(t, st.InFlight)
	requireEmpty(t, q) // the nack's delay holds it
	img := crashImage(t, dir)
	require.NoError(t, q.Close())
	clk.Advance(10 * time.Second)
	for name, dir := range map[string]string{"crash": img, "close": dir} {
		t.Run(name, func(t *testing.T) {
			q := open(t, dir, opts)
			defer q.Close()
			require.Zero(t, q.Stats().Acked)
			got := tryDequeue(t, q)
			require.Equal(t, "m", string(got.Payload))
			require.Equal(t, 2, got.Deliveries, "the nack's delivery and this one")
			requireEmpty(t, q)
		})
	}
}
