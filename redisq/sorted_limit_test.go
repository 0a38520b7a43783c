package redisq_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestSortedLimitAtPull: a pending value that had MaxDeliveries already
// (given back by a handle with no limit) is dead-lettered by the pull of
// a handle that applies the limit, with the embedded queue's reason, and
// the key's other values are pulled at the key's new place in the pull
// order, as queue.Sorted does.
func TestSortedLimitAtPull(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	open := func(maxd int) *redisq.Sorted[int64] {
		s, err := redisq.OpenSorted[int64](ctx, rdb, "limit",
			&redisq.SortedOptions{Options: redisq.Options{MaxDeliveries: maxd, ManualRequeue: true}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	loose := open(-1)
	require.NoError(t, loose.Publish(ctx, 1, "k", []byte("k1")))
	require.NoError(t, loose.Publish(ctx, 2, "j", []byte("j2")))
	for range 3 {
		bs, err := loose.TryPull(10)
		require.NoError(t, err)
		require.Len(t, bs, 2)
		for _, b := range bs {
			require.NoError(t, b.Nack(0))
		}
	}
	require.NoError(t, loose.Publish(ctx, 3, "k", []byte("k3")))
	require.NoError(t, loose.Publish(ctx, 2, "m", []byte("m2")))

	strict := open(3)
	bs, err := strict.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 2, "key j holds only a value past the limit")
	require.Equal(t, []string{"m", "k"}, []string{bs[0].Key, bs[1].Key},
		"k takes its place at its first value the pull may deliver")
	require.Len(t, bs[1].Values, 1, "k's value past the limit is not delivered")
	require.Equal(t, "k3", string(bs[1].Values[0].Payload))
	require.Equal(t, 1, bs[1].Values[0].Deliveries)
	st := strict.Stats()
	require.Equal(t, 2, st.SortedDead)
	require.Equal(t, 0, st.SortedPending)
	require.Equal(t, 2, st.SortedLeased)
	dead, err := strict.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, dead, 2)
	for _, d := range dead {
		require.Equal(t, "3 deliveries, limit 3; not delivered again", d.Reason)
		require.Equal(t, 3, d.Deliveries)
	}
	require.Equal(t, []string{"k", "j"}, []string{dead[0].Key, dead[1].Key})
	_, err = strict.TryPull(10)
	require.ErrorIs(t, err, queue.ErrEmpty)
}
