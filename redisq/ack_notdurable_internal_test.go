package redisq

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// ErrNotDurable promises the change was made. Gathered acks that name a
// producer's id get -3 from ack1 (nothing written); with Replicas and a
// WAIT that falls short, the settle call must still run and make them.
func TestGatheredAckNotDurableIsApplied(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	plain, err := Open(ctx, srv.Client(), "nd", &Options{ManualRequeue: true})
	require.NoError(t, err)
	defer plain.Close()
	rep, err := Open(ctx, srv.Client(), "nd", &Options{ManualRequeue: true, Replicas: 1, WaitTimeout: 20 * time.Millisecond})
	require.NoError(t, err)
	defer rep.Close()
	_, err = plain.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("d")}, {ID: "given", Payload: []byte("e")}})
	require.NoError(t, err)
	ms, err := plain.DequeueBatch(ctx, 2)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	errs := rep.settle("ack", "", []queue.Receipt{ms[0].Receipt, ms[1].Receipt})
	require.ErrorIs(t, errs[0], ErrNotDurable)
	require.ErrorIs(t, errs[1], ErrNotDurable)
	for _, m := range ms {
		s := strconv.FormatUint(m.Receipt.Seq, 10)
		n, err := srv.Client().ZScore(ctx, rep.keys[4], s).Result()
		require.Error(t, err, "ErrNotDurable says the ack was made, yet seq %s is still leased (score %v)", s, n)
	}
}
