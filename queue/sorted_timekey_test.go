package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestSortedTimeKeyRange: a time.Time sort key is kept as nanoseconds
// since 1970 in an int64, which holds the years 1678 to 2262 only. A time
// outside them (the zero time, a far-future "never") must be refused by
// Publish, not wrap into another time that is then delivered, in another
// place of the order, as the value's sort key.
func TestSortedTimeKeyRange(t *testing.T) {
	sq, err := queue.OpenSorted[time.Time](t.TempDir(), nil)
	require.NoError(t, err)
	defer sq.Close()
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	for _, bad := range []time.Time{{}, time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)} {
		err := sq.Publish(ctx, bad, "k-"+bad.String(), []byte("out of range"))
		require.ErrorIs(t, err, queue.ErrInvalidOptions, "Publish at %v", bad)
	}
	edges := []time.Time{time.Unix(0, -1<<63), now, time.Unix(0, 1<<63-1)}
	for i, at := range edges {
		require.NoError(t, sq.Publish(ctx, at, "k", []byte{byte(i)}))
	}
	bs, err := sq.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.Len(t, bs[0].Values, len(edges))
	for i, v := range bs[0].Values {
		require.True(t, v.Sort.Equal(edges[i]), "value %d: sort key %v, published %v", i, v.Sort, edges[i])
		require.Equal(t, []byte{byte(i)}, v.Payload)
	}
}
