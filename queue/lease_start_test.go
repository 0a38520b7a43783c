package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// A lease is measured from the delivery, not the enqueue, as the README
// says: a message (a sorted value) that waited longer than AckTimeout
// before it was delivered (pulled) still gets its whole AckTimeout.
func TestLeaseRunsFromDelivery(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	o := queue.Options{Clock: clk, AckTimeout: time.Minute, ManualRequeue: true}
	q := open(t, t.TempDir(), &o)
	defer q.Close()
	s, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{Options: o})
	require.NoError(t, err)
	defer s.Close()
	enqueue(t, q, "a")
	require.NoError(t, s.Publish(ctx, 1, "k", []byte("v")))
	clk.Advance(time.Hour)
	m := tryDequeue(t, q)
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	clk.Advance(time.Minute - time.Nanosecond)
	n, err := q.RequeueExpired()
	require.NoError(t, err)
	require.Zero(t, n, "the message's lease has a nanosecond left")
	n, err = s.RequeueExpired()
	require.NoError(t, err)
	require.Zero(t, n, "the batch's lease has a nanosecond left")
	require.NoError(t, m.Ack())
	require.NoError(t, bs[0].Ack())
}
