package redisq_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestSortedLongKey pins a difference from the embedded queue (Publish's
// doc): a message key of 65,535 bytes or more, which the embedded queue
// takes, is refused with queue.ErrInvalidOptions, and nothing is
// published; a key one byte shorter is taken and pulled whole.
func TestSortedLongKey(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	long := strings.Repeat("k", 65535)

	emb, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{Options: queue.Options{Sync: queue.SyncNever}})
	require.NoError(t, err)
	defer emb.Close()
	require.NoError(t, emb.Publish(ctx, 1, long, []byte("v")), "the embedded queue takes it")

	s, err := redisq.OpenSorted[int64](ctx, srv.Client(), "long", nil)
	require.NoError(t, err)
	defer s.Close()
	require.ErrorIs(t, s.Publish(ctx, 1, long, []byte("v")), queue.ErrInvalidOptions)
	require.Zero(t, s.Stats().SortedPending)
	require.NoError(t, s.Publish(ctx, 2, long[1:], []byte("w")))
	require.NoError(t, s.Publish(ctx, 3, long[1:], []byte("x")))
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.Equal(t, long[1:], bs[0].Key)
	require.Len(t, bs[0].Values, 2)
}
