package queuetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// deadSet publishes keys a (sort 1, 2) and b (sort 3), pulls them and
// dead-letters both batches, and returns the dead values as listed.
func (v *senv) deadSet() []queue.DeadValue[int64] {
	v.t.Helper()
	v.publish(1, "a")
	v.publish(2, "a")
	v.clock.Advance(time.Second)
	v.publish(3, "b")
	bs := v.pull(10)
	require.Len(v.t, bs, 2)
	for _, b := range bs {
		require.NoError(v.t, b.DeadLetter("poison "+b.Key))
	}
	ds, err := v.q.DeadValues(0, 0)
	require.NoError(v.t, err)
	require.Len(v.t, ds, 3)
	return ds
}

// testDeadValues: dead values are listed in Seq order with their key,
// sort key, payload, reason, deliveries and publish time, a page at a
// time; one requeued is pending again under its key at its sort key with
// its delivery count reset; one purged is gone; the counts follow.
func testDeadValues(t *testing.T, e SortedEngine) {
	v := openSorted(t, e, SortedOptions{})
	at := v.clock.Now()
	ds := v.deadSet()
	require.Equal(t, []int64{1, 2, 3}, []int64{ds[0].Sort, ds[1].Sort, ds[2].Sort})
	require.Equal(t, []string{"a", "a", "b"}, []string{ds[0].Key, ds[1].Key, ds[2].Key})
	require.Less(t, ds[0].Seq, ds[1].Seq)
	require.Less(t, ds[1].Seq, ds[2].Seq)
	require.Equal(t, "a:1", string(ds[0].Payload))
	require.Equal(t, "poison a", ds[0].Reason)
	require.Equal(t, "poison b", ds[2].Reason)
	require.Equal(t, 1, ds[0].Deliveries)
	require.True(t, ds[0].PublishedAt.Equal(at), "PublishedAt %v, want %v", ds[0].PublishedAt, at)
	require.True(t, ds[2].PublishedAt.Equal(at.Add(time.Second)), "PublishedAt %v", ds[2].PublishedAt)

	page, err := v.q.DeadValues(ds[1].Seq, 1)
	require.NoError(t, err)
	require.Equal(t, ds[1:2], page, "a page from a seq")
	page, err = v.q.DeadValues(ds[2].Seq+1, 10)
	require.NoError(t, err)
	require.Empty(t, page, "a page past the last")
	s := v.q.Stats()
	require.Equal(t, 3, s.SortedDead)
	require.Zero(t, s.SortedPending)

	require.NoError(t, v.q.RequeueDead(ds[2].Seq))
	require.ErrorIs(t, v.q.RequeueDead(ds[2].Seq), queue.ErrNotFound, "pending now, not dead")
	require.NoError(t, v.q.PurgeDead(ds[0].Seq))
	require.ErrorIs(t, v.q.PurgeDead(ds[0].Seq), queue.ErrNotFound)
	require.ErrorIs(t, v.q.RequeueDead(ds[0].Seq), queue.ErrNotFound)
	s = v.q.Stats()
	require.Equal(t, 1, s.SortedDead)
	require.Equal(t, 1, s.SortedPending)
	require.Equal(t, 1, s.SortedKeys)
	left, err := v.q.DeadValues(0, 0)
	require.NoError(t, err)
	require.Equal(t, ds[1:2], left)

	bs := v.pull(10)
	require.Len(t, bs, 1)
	require.Equal(t, "b", bs[0].Key)
	require.Equal(t, []int64{3}, sorts(bs[0]))
	require.Equal(t, []byte("b:3"), bs[0].Values[0].Payload)
	require.True(t, bs[0].Values[0].PublishedAt.Equal(ds[2].PublishedAt), "a requeued value keeps its publish time")
	require.Equal(t, 1, bs[0].Values[0].Deliveries, "a requeued value's count starts over")
	require.NoError(t, bs[0].Ack())

	n, err := v.q.RequeueAllDead()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = v.q.PurgeAllDead()
	require.NoError(t, err)
	require.Zero(t, n)
	s = v.q.Stats()
	require.Zero(t, s.SortedDead)
	require.Equal(t, 1, s.SortedPending)
	bs = v.pull(10)
	require.Equal(t, []int64{2}, sorts(bs[0]))
	require.NoError(t, bs[0].Ack())
}

// testDeadValuesAll: RequeueAllDead puts every dead value back at its own
// key and sort key, in one pull order with the values pending; then
// PurgeAllDead removes every dead value, and none comes back.
func testDeadValuesAll(t *testing.T, e SortedEngine) {
	v := openSorted(t, e, SortedOptions{})
	v.deadSet()
	v.publish(0, "c")
	n, err := v.q.RequeueAllDead()
	require.NoError(t, err)
	require.Equal(t, 3, n)
	bs := v.pull(100)
	require.Len(t, bs, 3)
	require.Equal(t, []string{"c", "a", "b"}, []string{bs[0].Key, bs[1].Key, bs[2].Key})
	require.Equal(t, []int64{1, 2}, sorts(bs[1]))
	for _, b := range bs {
		require.NoError(t, b.DeadLetter("again"))
	}
	n, err = v.q.PurgeAllDead()
	require.NoError(t, err)
	require.Equal(t, 4, n)
	ds, err := v.q.DeadValues(0, 0)
	require.NoError(t, err)
	require.Empty(t, ds)
	s := v.q.Stats()
	require.Zero(t, s.SortedDead+s.SortedPending+s.SortedBatches)
	v.empty()
}

// testDeadValueFence: RequeueDeadValue and PurgeDeadValue act on the dead
// value named by its Seq and its PublishedAt, and refuse, with
// ErrNotFound and nothing changed, a name whose Seq holds a value
// published at another time, or no dead value at all. After Close every
// call fails with ErrClosed.
func testDeadValueFence(t *testing.T, e SortedEngine) {
	v := openSorted(t, e, SortedOptions{})
	ds := v.deadSet()
	for _, tt := range []struct {
		name string
		d    queue.DeadValue[int64]
	}{
		{"another publish time", func() queue.DeadValue[int64] {
			d := ds[0]
			d.PublishedAt = d.PublishedAt.Add(time.Nanosecond)
			return d
		}()},
		{"zero publish time", queue.DeadValue[int64]{Seq: ds[0].Seq}},
		{"no such seq", func() queue.DeadValue[int64] { d := ds[0]; d.Seq = ds[2].Seq + 1000; return d }()},
		{"another value's publish time", func() queue.DeadValue[int64] { d := ds[0]; d.PublishedAt = ds[2].PublishedAt; return d }()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, v.q.RequeueDeadValue(tt.d), queue.ErrNotFound)
			require.ErrorIs(t, v.q.PurgeDeadValue(tt.d), queue.ErrNotFound)
			now, err := v.q.DeadValues(0, 0)
			require.NoError(t, err)
			require.Equal(t, ds, now, "a refused name changed the dead set")
		})
	}
	require.NoError(t, v.q.RequeueDeadValue(ds[0]))
	require.ErrorIs(t, v.q.RequeueDeadValue(ds[0]), queue.ErrNotFound, "the value is pending now")
	require.NoError(t, v.q.PurgeDeadValue(ds[2]))
	require.ErrorIs(t, v.q.PurgeDeadValue(ds[2]), queue.ErrNotFound)
	left, err := v.q.DeadValues(0, 0)
	require.NoError(t, err)
	require.Equal(t, ds[1:2], left)
	bs := v.pull(10)
	require.Len(t, bs, 1)
	require.Equal(t, "a", bs[0].Key)
	require.True(t, bs[0].Values[0].PublishedAt.Equal(ds[0].PublishedAt))
	require.NoError(t, v.q.Close())
	require.ErrorIs(t, v.q.RequeueDeadValue(ds[1]), queue.ErrClosed)
	require.ErrorIs(t, v.q.PurgeDeadValue(ds[1]), queue.ErrClosed)
	require.ErrorIs(t, v.q.RequeueDead(ds[1].Seq), queue.ErrClosed)
	require.ErrorIs(t, v.q.PurgeDead(ds[1].Seq), queue.ErrClosed)
	_, err = v.q.DeadValues(0, 0)
	require.ErrorIs(t, err, queue.ErrClosed)
	_, err = v.q.RequeueAllDead()
	require.ErrorIs(t, err, queue.ErrClosed)
	_, err = v.q.PurgeAllDead()
	require.ErrorIs(t, err, queue.ErrClosed)
}

// testDeadValuesMaxDeliveries: a value dead at MaxDeliveries is listed
// with its deliveries, and once requeued is delivered again, counted
// from one.
func testDeadValuesMaxDeliveries(t *testing.T, e SortedEngine) {
	v := openSorted(t, e, SortedOptions{Options: Options{MaxDeliveries: 2}})
	v.publish(1, "a")
	require.NoError(t, v.pull(1)[0].Nack(0))
	require.NoError(t, v.pull(1)[0].Nack(0))
	v.empty()
	ds, err := v.q.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, 2, ds[0].Deliveries)
	require.Equal(t, "a", ds[0].Key)
	require.NotEmpty(t, ds[0].Reason)
	require.NoError(t, v.q.RequeueDeadValue(ds[0]))
	b := v.pull(1)[0]
	require.Equal(t, 1, b.Values[0].Deliveries)
	require.NoError(t, b.Ack())
}

// testDeadValuesReadOnly: a handle opened with Options.ReadOnly lists the
// dead values and refuses every change with ErrReadOnly, changing
// nothing.
func testDeadValuesReadOnly(t *testing.T, e SortedEngine) {
	v := openSorted(t, e, SortedOptions{})
	ds := v.deadSet()
	r := e.OpenReadOnly(t, v.q)
	t.Cleanup(func() { _ = r.Close() })
	got, err := r.DeadValues(0, 0)
	require.NoError(t, err)
	require.Equal(t, ds, got)
	require.ErrorIs(t, r.RequeueDead(ds[0].Seq), queue.ErrReadOnly)
	require.ErrorIs(t, r.PurgeDead(ds[0].Seq), queue.ErrReadOnly)
	require.ErrorIs(t, r.RequeueDeadValue(ds[1]), queue.ErrReadOnly)
	require.ErrorIs(t, r.PurgeDeadValue(ds[1]), queue.ErrReadOnly)
	_, err = r.RequeueAllDead()
	require.ErrorIs(t, err, queue.ErrReadOnly)
	_, err = r.PurgeAllDead()
	require.ErrorIs(t, err, queue.ErrReadOnly)
	got, err = r.DeadValues(0, 0)
	require.NoError(t, err)
	require.Equal(t, ds, got, "a read-only handle changed the dead set")
	s := r.Stats()
	require.Equal(t, 3, s.SortedDead)
	require.Zero(t, s.SortedPending)
}

// testWindowedDeadValues: a windowed queue's dead values carry their
// publish time as their sort key; one requeued is due again a window
// after that time.
func testWindowedDeadValues(t *testing.T, e SortedEngine) {
	o := SortedOptions{Options: Options{AckTimeout: time.Hour, MaxDeliveries: -1}, Window: time.Minute}
	o.Clock = NewClock()
	q := e.OpenWindowed(t, o)
	t.Cleanup(func() { _ = q.Close() })
	ctx := context.Background()
	at := o.Clock.Now()
	require.NoError(t, q.Publish(ctx, "a", []byte("1")))
	o.Clock.Advance(time.Minute)
	bs, err := q.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.NoError(t, bs[0].DeadLetter("bad"))
	ds, err := q.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, "a", ds[0].Key)
	require.True(t, ds[0].Sort.Equal(at), "Sort %v, want %v", ds[0].Sort, at)
	require.True(t, ds[0].PublishedAt.Equal(at))
	require.Equal(t, "bad", ds[0].Reason)
	require.Equal(t, []byte("1"), ds[0].Payload)
	require.NoError(t, q.RequeueDeadValue(ds[0]))
	require.Equal(t, 1, q.Stats().SortedPending)
	bs, err = q.TryPull(10)
	require.NoError(t, err, "the value's window closed long ago")
	require.Len(t, bs, 1)
	require.True(t, bs[0].Values[0].Sort.Equal(at))
	require.NoError(t, bs[0].DeadLetter("bad again"))
	n, err := q.PurgeAllDead()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Zero(t, q.Stats().SortedDead)
}

// testSortedStatsAt: Stats.At is when the figures were read, by the
// handle's clock, and Closed is set once the handle is closed.
func testSortedStatsAt(t *testing.T, e SortedEngine) {
	v := openSorted(t, e, SortedOptions{})
	s := v.q.Stats()
	require.True(t, s.At.Equal(v.clock.Now()), "At %v, want %v", s.At, v.clock.Now())
	require.False(t, s.Closed)
	v.clock.Advance(90 * time.Second)
	v.publish(1, "k")
	s = v.q.Stats()
	require.True(t, s.At.Equal(v.clock.Now()), "At %v, want %v", s.At, v.clock.Now())
	require.Equal(t, 1, s.SortedPending)
	require.NoError(t, v.q.Close())
	require.True(t, v.q.Stats().Closed, fmt.Sprint("Stats after Close: ", v.q.Stats()))
}
