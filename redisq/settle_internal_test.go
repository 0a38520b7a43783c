package redisq

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestStaleAndLiveReceiptInOneCall: concurrent Acks are settled by one
// call, in the order they came. A stale receipt of a message gathered
// before the receipt of its live delivery fails alone: the live one
// still acks the message.
func TestStaleAndLiveReceiptInOneCall(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	q, err := Open(ctx, srv.Client(), "stale-first", nil)
	require.NoError(t, err)
	defer q.Close()
	for _, stale := range []bool{true, false} {
		_, err = q.Enqueue(ctx, []byte("x"))
		require.NoError(t, err)
		old, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, old.Nack(0))
		live, err := q.TryDequeue()
		require.NoError(t, err)
		require.Equal(t, old.Receipt.Seq, live.Receipt.Seq)

		rs := []queue.Receipt{old.Receipt, live.Receipt}
		if !stale {
			rs[0], rs[1] = rs[1], rs[0]
		}
		errs := q.settle("ack", "", rs)
		for i, r := range rs {
			if r == live.Receipt {
				require.NoError(t, errs[i], "the live delivery's ack (stale receipt first: %v)", stale)
			} else {
				require.ErrorIs(t, errs[i], queue.ErrLeaseLost)
			}
		}
		_, err = q.TryDequeue()
		require.ErrorIs(t, err, queue.ErrEmpty)
		require.Zero(t, q.Stats().InFlight)
	}
}
