package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// A message is leased to one delivery at a time: a delivery that is not
// settled keeps it until its deadline, its DeliveredAt plus AckTimeout,
// through compactions and snapshots made while it runs, and the next
// delivery begins no earlier than that deadline. Its consumer's ack then
// fails, the next one's succeeds, and the message stays gone in what a
// kill -9 leaves. Crash tests that judge a delivery reported after an ack
// rely on this bound (fuzz/kill9late_test.go).
func TestLeaseNotSharedUntilDeadline(t *testing.T) {
	const lease = 100 * time.Millisecond
	clk := newFakeClock()
	dir := t.TempDir()
	o := &queue.Options{Clock: clk, AckTimeout: lease, ManualRequeue: true, MaxDeliveries: 2,
		SegmentSize: 4096, SnapshotBytes: 1}
	q := open(t, dir, o)
	defer q.Close()
	ctx := context.Background()
	items := make([]queue.Item, 4)
	for i := range items {
		items[i] = queue.Item{Payload: []byte{byte('a' + i)}}
	}
	_, err := q.EnqueueBatch(ctx, items)
	require.NoError(t, err)
	first, err := q.DequeueBatch(ctx, len(items))
	require.NoError(t, err)
	require.Len(t, first, len(items))
	require.NoError(t, q.Compact(), "a compaction while the leases run")

	clk.Advance(lease - time.Nanosecond)
	requireEmpty(t, q)
	n, err := q.RequeueExpired()
	require.NoError(t, err)
	require.Zero(t, n, "a lease ended a nanosecond before its deadline")
	clk.Advance(time.Nanosecond)
	requireEmpty(t, q) // the deadline passed, but no look ended the leases yet
	require.NoError(t, q.Compact(), "a compaction while the leases ran out")
	n, err = q.RequeueExpired()
	require.NoError(t, err)
	require.Equal(t, len(items), n)

	second, err := q.DequeueBatch(ctx, len(items))
	require.NoError(t, err)
	require.Len(t, second, len(items))
	for i, m := range second {
		began := first[i].DeliveredAt
		require.Equal(t, first[i].Payload, m.Payload)
		require.False(t, m.DeliveredAt.Before(began.Add(lease)),
			"the second delivery of %q began %v after the first, whose lease of %v was not settled",
			m.Payload, m.DeliveredAt.Sub(began), lease)
		require.Equal(t, 2, m.Deliveries)
	}
	for _, m := range first {
		require.ErrorIs(t, m.Ack(), queue.ErrLeaseLost, "the ack of the delivery that ran out, while the next one runs")
	}
	require.NoError(t, second.Ack())
	require.NoError(t, q.Compact(), "a compaction after the acks")
	requireEmpty(t, q)

	img := crashImage(t, dir)
	r := open(t, img, &queue.Options{Clock: clk, AckTimeout: lease, MaxDeliveries: 2, SegmentSize: 4096})
	defer r.Close()
	st := r.Stats()
	require.Zero(t, st.Ready+st.Delayed+st.InFlight+st.Dead, "acked messages came back after a kill -9: %+v", st)
	requireEmpty(t, r)
}
