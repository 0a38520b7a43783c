package queuetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// oldestIs checks that Stats gives want (zero: none) as the oldest
// pending or leased value's publish time, to the nanosecond.
func oldestIs(t *testing.T, q interface{ Stats() queue.Stats }, want time.Time, what string) {
	t.Helper()
	s := q.Stats()
	require.NoError(t, s.OldestErr, what)
	require.True(t, s.OldestEnqueuedAt.Equal(want), "%s: OldestEnqueuedAt %v, want %v", what, s.OldestEnqueuedAt, want)
}

// testSortedOldest: Stats.OldestEnqueuedAt of a sorted queue is the
// publish time of its oldest pending or leased value, not that of its
// smallest sort key; dead values are left out, and one requeued from the
// dead set counts again.
func testSortedOldest(t *testing.T, e SortedEngine) {
	v := openSorted(t, e, SortedOptions{Options: Options{MaxDeliveries: 2}})
	oldestIs(t, v.q, time.Time{}, "empty")
	v.clock.Advance(1234567 * time.Nanosecond) // a time not on a microsecond
	t0 := v.clock.Now()
	v.publish(50, "late-sort")
	v.clock.Advance(time.Second + 3*time.Nanosecond)
	t1 := v.clock.Now()
	v.publish(1, "early-sort")
	v.publish(2, "early-sort")
	oldestIs(t, v.q, t0, "two keys pending: the first published, though its sort key is larger")

	bs := v.pull(1) // early-sort, the smallest sort key
	require.Len(t, bs, 1)
	require.Equal(t, "early-sort", bs[0].Key)
	oldestIs(t, v.q, t0, "one key leased")
	bs2 := v.pull(10)
	require.Len(t, bs2, 1)
	oldestIs(t, v.q, t0, "both keys leased")
	require.NoError(t, bs2[0].Ack())
	oldestIs(t, v.q, t1, "the oldest acked")

	require.NoError(t, bs[0].Nack(0))
	oldestIs(t, v.q, t1, "nacked back to pending")
	bs = v.pull(10)
	require.Len(t, bs, 1)
	require.NoError(t, bs[0].Nack(0)) // its second delivery: dead at MaxDeliveries
	oldestIs(t, v.q, time.Time{}, "every value dead")
	require.Equal(t, 2, v.q.Stats().SortedDead)

	v.clock.Advance(time.Minute)
	t2 := v.clock.Now()
	v.publish(7, "new")
	oldestIs(t, v.q, t2, "dead values are left out")
	n, err := v.q.RequeueAllDead()
	require.NoError(t, err)
	require.Equal(t, 2, n)
	oldestIs(t, v.q, t1, "requeued values count by their publish time")

	bs = v.pull(10)
	require.Len(t, bs, 2)
	for _, b := range bs {
		if b.Key == "early-sort" {
			require.NoError(t, b.DeadLetter("gone"))
		}
	}
	oldestIs(t, v.q, t2, "dead-lettered")
	v.clock.Advance(time.Hour)
	_, err = v.q.RequeueExpired()
	require.NoError(t, err)
	oldestIs(t, v.q, t2, "an expired lease puts its value back")
	_, err = v.q.PurgeAllDead()
	require.NoError(t, err)
	bs = v.pull(10)
	require.Len(t, bs, 1)
	require.NoError(t, bs[0].Ack())
	oldestIs(t, v.q, time.Time{}, "all acked")
}

// testWindowedOldest: a windowed queue's OldestEnqueuedAt is the publish
// time of its oldest pending or leased value.
func testWindowedOldest(t *testing.T, e SortedEngine) {
	o := SortedOptions{Options: Options{AckTimeout: time.Hour, MaxDeliveries: -1}, Window: time.Minute}
	o.Clock = NewClock()
	q := e.OpenWindowed(t, o)
	t.Cleanup(func() { _ = q.Close() })
	ctx := context.Background()
	oldestIs(t, q, time.Time{}, "empty")
	o.Clock.Advance(7 * time.Nanosecond)
	t0 := o.Clock.Now()
	require.NoError(t, q.Publish(ctx, "a", []byte("1")))
	o.Clock.Advance(30 * time.Second)
	t1 := o.Clock.Now()
	require.NoError(t, q.Publish(ctx, "b", []byte("2")))
	oldestIs(t, q, t0, "pending")
	o.Clock.Advance(30 * time.Second)
	bs, err := q.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	oldestIs(t, q, t0, "leased")
	require.NoError(t, bs[0].Ack())
	oldestIs(t, q, t1, "acked")
}
