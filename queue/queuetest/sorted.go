package queuetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// SortedOptions are what a sorted or windowed subtest asks of the queue
// it opens.
type SortedOptions struct {
	Options
	SingleFlight bool          // as queue.SortedOptions.SingleFlight
	Window       time.Duration // windowed queues only
}

// SortedEngine is the engine under test for sorted and windowed queues.
// Both open new, empty queues with automatic requeueing off; the suite
// closes them.
type SortedEngine struct {
	Open         func(t *testing.T, o SortedOptions) queue.SortedQueue[int64]
	OpenWindowed func(t *testing.T, o SortedOptions) queue.WindowedQueue
	// OpenReadOnly returns a handle opened with Options.ReadOnly on the
	// queue of q, a handle Open returned. An engine that allows one
	// writer at a time closes q first; the suite then uses only the
	// handle returned, and closes it.
	OpenReadOnly func(t *testing.T, q queue.SortedQueue[int64]) queue.SortedQueue[int64]
}

// TestSorted runs every subtest of the sorted and windowed queues
// against e.
func TestSorted(t *testing.T, e SortedEngine) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, e SortedEngine)
	}{
		{"WholeKeysInOrder", testWholeKeys},
		{"Overshoot", testOvershoot},
		{"AckTwice", testBatchAckTwice},
		{"NackHold", testBatchNackHold},
		{"Expiry", testBatchExpiry},
		{"MaxDeliveries", testBatchMaxDeliveries},
		{"ExtendAndDeadLetter", testBatchExtendDead},
		{"SingleFlight", testSingleFlight},
		{"BlockingPullWakes", testBlockingPull},
		{"CloseEndsPull", testPullClose},
		{"Windowed", testWindowed},
		{"WindowedPublishTime", testWindowedPublishTime},
		{"FarFuture", testSortedFarFuture},
		{"WindowedForever", testWindowedForever},
		{"FineTimes", testSortedFineTimes},
		{"DeadValues", testDeadValues},
		{"DeadValuesAll", testDeadValuesAll},
		{"DeadValueFence", testDeadValueFence},
		{"DeadValuesMaxDeliveries", testDeadValuesMaxDeliveries},
		{"DeadValuesReadOnly", testDeadValuesReadOnly},
		{"WindowedDeadValues", testWindowedDeadValues},
		{"StatsAt", testSortedStatsAt},
		{"Oldest", testSortedOldest},
		{"WindowedOldest", testWindowedOldest},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, e) })
	}
}

type senv struct {
	t     *testing.T
	q     queue.SortedQueue[int64]
	clock *Clock
}

func openSorted(t *testing.T, e SortedEngine, o SortedOptions) *senv {
	t.Helper()
	if o.AckTimeout == 0 {
		o.AckTimeout = 10 * time.Second
	}
	if o.MaxDeliveries == 0 {
		o.MaxDeliveries = -1
	}
	o.Clock = NewClock()
	q := e.Open(t, o)
	t.Cleanup(func() { _ = q.Close() })
	return &senv{t: t, q: q, clock: o.Clock}
}

func (v *senv) publish(sort int64, key string) {
	v.t.Helper()
	require.NoError(v.t, v.q.Publish(context.Background(), sort, key, []byte(fmt.Sprint(key, ":", sort))))
}

func (v *senv) pull(max int) []*queue.Batch[int64] {
	v.t.Helper()
	bs, err := v.q.TryPull(max)
	require.NoError(v.t, err)
	return bs
}

func (v *senv) empty() {
	v.t.Helper()
	_, err := v.q.TryPull(100)
	require.ErrorIs(v.t, err, queue.ErrEmpty)
}

func sorts(b *queue.Batch[int64]) []int64 {
	out := make([]int64, len(b.Values))
	for i, x := range b.Values {
		out[i] = x.Sort
	}
	return out
}

func testWholeKeys(t *testing.T, e SortedEngine) {
	v := openSorted(t, e, SortedOptions{})
	at := v.clock.Now()
	v.publish(7, "k1")
	v.publish(5, "k1")
	v.publish(-1, "k2")
	v.publish(-3, "k2")
	v.publish(2, "k\x00\xff")
	bs := v.pull(3)
	require.Len(t, bs, 2, "whole keys until max values or more")
	require.Equal(t, "k2", bs[0].Key)
	require.Equal(t, []int64{-3, -1}, sorts(bs[0]))
	require.Equal(t, []byte("k2:-3"), bs[0].Values[0].Payload)
	require.True(t, bs[0].Values[0].PublishedAt.Equal(at))
	require.Equal(t, 1, bs[0].Values[0].Deliveries)
	require.Equal(t, "k\x00\xff", bs[1].Key)
	require.NotEqual(t, bs[0].Receipt, bs[1].Receipt)
	rest := v.pull(10)
	require.Len(t, rest, 1)
	require.Equal(t, []int64{5, 7}, sorts(rest[0]))
	v.empty()
	for _, b := range append(bs, rest...) {
		require.NoError(t, b.Ack())
	}
	s := v.q.Stats()
	require.Equal(t, uint64(5), s.Published)
	require.Equal(t, uint64(3), s.Pulled)
	require.Equal(t, uint64(3), s.BatchesAcked)
	require.Zero(t, s.SortedPending+s.SortedBatches)
}

func testOvershoot(t *testing.T, e SortedEngine) {
	v := openSorted(t, e, SortedOptions{})
	for i := range 5 {
		v.publish(int64(i), "big")
	}
	v.publish(100, "small")
	bs := v.pull(2)
	require.Len(t, bs, 1, "a key with more than max values comes whole, alone")
	require.Len(t, bs[0].Values, 5)
	require.NoError(t, bs[0].Ack())
}

func testBatchAckTwice(t *testing.T, e SortedEngine) {
	v := openSorted(t, e, SortedOptions{})
	v.publish(1, "k")
	b := v.pull(1)[0]
	require.NoError(t, b.Ack())
	require.ErrorIs(t, b.Ack(), queue.ErrLeaseLost)
	require.ErrorIs(t, v.q.Nack(b.Receipt, 0), queue.ErrLeaseLost)
	require.ErrorIs(t, v.q.Ack(queue.BatchReceipt{Lease: 12345}), queue.ErrLeaseLost)
	v.empty()
}

func testBatchNackHold(t *testing.T, e SortedEngine) {
	v := openSorted(t, e, SortedOptions{Options: Options{AckTimeout: time.Hour}})
	v.publish(1, "a")
	v.publish(2, "a")
	v.publish(3, "b")
	a := v.pull(1)[0]
	require.Equal(t, "a", a.Key)
	require.NoError(t, a.Nack(time.Minute))
	b := v.pull(10)
	require.Len(t, b, 1)
	require.Equal(t, "b", b[0].Key, "a nacked key is held for its delay")
	v.clock.Advance(59 * time.Second)
	v.empty()
	v.clock.Advance(time.Second)
	again := v.pull(10)
	require.Len(t, again, 1)
	require.Equal(t, []int64{1, 2}, sorts(again[0]), "values back at their own sort keys")
	require.Equal(t, 2, again[0].Values[0].Deliveries)
	require.NoError(t, again[0].Ack())
	require.NoError(t, b[0].Ack())
}

func testBatchExpiry(t *testing.T, e SortedEngine) {
	v := openSorted(t, e, SortedOptions{})
	v.publish(1, "a")
	first := v.pull(1)[0]
	v.clock.Advance(11 * time.Second)
	n, err := v.q.RequeueExpired()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	second := v.pull(1)[0]
	require.Equal(t, 2, second.Values[0].Deliveries)
	require.ErrorIs(t, first.Ack(), queue.ErrLeaseLost)
	require.NoError(t, second.Ack())
}

func testBatchMaxDeliveries(t *testing.T, e SortedEngine) {
	v := openSorted(t, e, SortedOptions{Options: Options{MaxDeliveries: 2}})
	v.publish(1, "a")
	v.publish(2, "a")
	require.NoError(t, v.pull(1)[0].Nack(0))
	b := v.pull(1)[0]
	require.Equal(t, 2, b.Values[0].Deliveries)
	require.NoError(t, b.Nack(0))
	v.empty()
	require.Equal(t, 2, v.q.Stats().SortedDead)
}

func testBatchExtendDead(t *testing.T, e SortedEngine) {
	v := openSorted(t, e, SortedOptions{})
	v.publish(1, "a")
	v.publish(2, "b")
	bs := v.pull(10)
	require.Len(t, bs, 2)
	require.NoError(t, bs[0].Extend(time.Hour))
	require.NoError(t, v.q.Extend(bs[1].Receipt, time.Hour))
	v.clock.Advance(time.Minute)
	n, err := v.q.RequeueExpired()
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, bs[0].DeadLetter("bad"))
	require.NoError(t, v.q.DeadLetter(bs[1].Receipt, "bad too"))
	require.ErrorIs(t, bs[0].Ack(), queue.ErrLeaseLost)
	s := v.q.Stats()
	require.Equal(t, 2, s.SortedDead)
	require.Zero(t, s.SortedBatches)
	require.ErrorIs(t, bs[0].Extend(0), queue.ErrInvalidOptions)
}

func testSingleFlight(t *testing.T, e SortedEngine) {
	for _, single := range []bool{false, true} {
		t.Run(fmt.Sprint("single=", single), func(t *testing.T) {
			v := openSorted(t, e, SortedOptions{SingleFlight: single})
			v.publish(1, "k")
			first := v.pull(10)[0]
			v.publish(2, "k")
			if single {
				v.empty()
				require.NoError(t, first.Ack())
			}
			next := v.pull(10)
			require.Len(t, next, 1)
			require.Equal(t, []int64{2}, sorts(next[0]))
			require.NoError(t, next[0].Ack())
			if !single {
				require.NoError(t, first.Ack())
			}
		})
	}
}

func testBlockingPull(t *testing.T, e SortedEngine) {
	v := openSorted(t, e, SortedOptions{})
	got := make(chan []*queue.Batch[int64], 1)
	errc := make(chan error, 1)
	go func() {
		bs, err := v.q.Pull(context.Background(), 10)
		if err != nil {
			errc <- err
			return
		}
		got <- bs
	}()
	time.Sleep(50 * time.Millisecond)
	v.publish(1, "k")
	select {
	case bs := <-got:
		require.Equal(t, "k", bs[0].Key)
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("blocked Pull did not wake on Publish")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, err := v.q.Pull(ctx, 10)
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(2 * time.Second):
		t.Fatal("Pull did not return after its context was cancelled")
	}
}

// testPullClose: Close returns a Pull that blocks, sorted or windowed
// (waiting for a window to close), with ErrClosed, and every call after
// it fails with ErrClosed.
func testPullClose(t *testing.T, e SortedEngine) {
	v := openSorted(t, e, SortedOptions{})
	o := SortedOptions{Options: Options{AckTimeout: 10 * time.Second, MaxDeliveries: -1, Clock: NewClock()}, Window: time.Minute}
	w := e.OpenWindowed(t, o)
	require.NoError(t, w.Publish(context.Background(), "k", []byte("v"))) // due in a minute
	pulls := []func() error{
		func() error { _, err := v.q.Pull(context.Background(), 10); return err },
		func() error { _, err := w.Pull(context.Background(), 10); return err },
	}
	closes := []func() error{v.q.Close, w.Close}
	for i, pull := range pulls {
		errc := make(chan error, 1)
		go func() { errc <- pull() }()
		time.Sleep(50 * time.Millisecond)
		require.NoError(t, closes[i]())
		select {
		case err := <-errc:
			require.ErrorIs(t, err, queue.ErrClosed)
		case <-time.After(5 * time.Second):
			t.Fatal("a blocked Pull did not return at Close")
		}
	}
	_, err := v.q.TryPull(10)
	require.ErrorIs(t, err, queue.ErrClosed)
	require.ErrorIs(t, v.q.Publish(context.Background(), 1, "k", nil), queue.ErrClosed)
	_, err = w.TryPull(10)
	require.ErrorIs(t, err, queue.ErrClosed)
}

// testWindowedPublishTime: a windowed value's sort key is its publish
// time, one reading of the clock, even when the clock moves between any
// two readings: its Sort is its PublishedAt, pulled or dead, so that its
// key is due Window after that PublishedAt and not after an earlier
// reading.
func testWindowedPublishTime(t *testing.T, e SortedEngine) {
	o := SortedOptions{Options: Options{AckTimeout: time.Hour, MaxDeliveries: -1}, Window: time.Minute}
	o.Clock = NewClock()
	q := e.OpenWindowed(t, o)
	t.Cleanup(func() { _ = q.Close() })
	o.Clock.StepEachReading(time.Millisecond)
	require.NoError(t, q.Publish(context.Background(), "a", []byte("1")))
	o.Clock.StepEachReading(0)
	o.Clock.Advance(time.Hour)
	bs, err := q.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	v := bs[0].Values[0]
	require.True(t, v.Sort.Equal(v.PublishedAt), "pulled value: Sort %v, PublishedAt %v", v.Sort, v.PublishedAt)
	require.NoError(t, bs[0].DeadLetter("look at it dead"))
	ds, err := q.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.True(t, ds[0].Sort.Equal(ds[0].PublishedAt), "dead value: Sort %v, PublishedAt %v", ds[0].Sort, ds[0].PublishedAt)
}

func testWindowed(t *testing.T, e SortedEngine) {
	o := SortedOptions{Options: Options{AckTimeout: time.Hour, MaxDeliveries: -1}, Window: time.Minute}
	o.Clock = NewClock()
	q := e.OpenWindowed(t, o)
	t.Cleanup(func() { _ = q.Close() })
	ctx := context.Background()
	require.NoError(t, q.Publish(ctx, "a", []byte("1")))
	o.Clock.Advance(30 * time.Second)
	require.NoError(t, q.Publish(ctx, "a", []byte("2")))
	require.NoError(t, q.Publish(ctx, "b", []byte("3")))
	_, err := q.TryPull(10)
	require.ErrorIs(t, err, queue.ErrEmpty, "no window has closed")
	o.Clock.Advance(30 * time.Second)
	bs, err := q.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1, "a's window closed, b's not")
	require.Equal(t, "a", bs[0].Key)
	require.Len(t, bs[0].Values, 2)
	require.NoError(t, bs[0].Ack())
	require.NoError(t, q.Publish(ctx, "a", []byte("4")))
	o.Clock.Advance(30 * time.Second)
	bs, err = q.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.Equal(t, "b", bs[0].Key, "a value published after the pull starts a new window")
	require.NoError(t, bs[0].Ack())
}
