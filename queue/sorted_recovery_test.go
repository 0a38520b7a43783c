package queue_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestSortedDeadOnOpen: a crash ends a sorted queue's leased batches at the
// next Open, as it ends an ack queue's leases, and Recovery says so: a
// batch is a lease made ready again (Requeued), and one whose values reach
// MaxDeliveries there counts in DeadOnOpen, as a message does.
func TestSortedDeadOnOpen(t *testing.T) {
	dir := t.TempDir()
	o := &queue.SortedOptions{Options: queue.Options{MaxDeliveries: 2}}
	s, err := queue.OpenSorted[int64](dir, o)
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, s.Publish(ctx, 1, "poison", []byte("p")))
	require.NoError(t, s.Publish(ctx, 2, "fine", []byte("f")))
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.NoError(t, bs[0].Nack(0)) // poison: one delivery
	bs, err = s.TryPull(10)           // poison's second delivery, fine's first
	require.NoError(t, err)
	require.Len(t, bs, 2)

	crashed, err := queue.OpenSorted[int64](crashImage(t, dir), o)
	require.NoError(t, err)
	defer crashed.Close()
	rec := crashed.Recovery()
	require.Equal(t, 2, rec.Requeued, "two batches were leased")
	require.Equal(t, 1, rec.DeadOnOpen, "poison reached MaxDeliveries")
	require.Equal(t, 1, crashed.Stats().SortedDead)
	require.Equal(t, 1, crashed.Stats().SortedPending)
}
