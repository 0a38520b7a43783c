package redisq_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestSortedDeadValuesKept pins a difference from the embedded queue
// (doc.go, README): a sorted queue's dead values are counted and kept,
// payloads included, and the handle offers none of queue.Sorted's calls
// that list, requeue or purge them.
func TestSortedDeadValuesKept(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s, err := redisq.OpenSorted[int64](ctx, rdb, "dead-kept", nil)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "k", []byte("v1")))
	require.NoError(t, s.Publish(ctx, 2, "k", []byte("v2")))
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.NoError(t, bs[0].DeadLetter("why"))
	st := s.Stats()
	require.Equal(t, 2, st.SortedDead)
	require.Zero(t, st.SortedPending+st.SortedBatches)
	kept, err := rdb.HLen(ctx, "walq:{dead-kept}:s:val").Result()
	require.NoError(t, err)
	require.EqualValues(t, 2, kept, "the dead values' payloads stay in the server")
	_, err = s.TryPull(10)
	require.ErrorIs(t, err, queue.ErrEmpty)

	var h any = s
	_, lists := h.(interface {
		DeadValues(uint64, int) ([]queue.DeadValue[int64], error)
	})
	_, requeues := h.(interface{ RequeueDead(uint64) error })
	_, purges := h.(interface{ PurgeAllDead() (int, error) })
	require.False(t, lists || requeues || purges, "a documented difference: update doc.go and the README with it")
	var e any = (*queue.Sorted[int64])(nil)
	_, purges = e.(interface{ PurgeAllDead() (int, error) })
	require.True(t, purges)
}
