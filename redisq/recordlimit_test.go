package redisq_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestRecordLimitDiffers pins a difference from the embedded queue: both
// hold a payload to MaxMessageSize (queue.ErrTooLarge at one byte more),
// and the embedded queue also refuses, with queue.ErrTooLarge, a record
// that its headers, id or dead-letter reason make longer than
// MaxMessageSize plus 1 MiB, which Redis takes; a sorted queue's key that
// long Redis refuses by its own key limit.
func TestRecordLimitDiffers(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	emb, err := queue.Open(t.TempDir(), &queue.Options{Sync: queue.SyncNever})
	require.NoError(t, err)
	defer emb.Close()
	red, err := redisq.Open(ctx, srv.Client(), "limits", &redisq.Options{ManualRequeue: true})
	require.NoError(t, err)
	defer red.Close()
	const max = 4 << 20
	big := map[string]string{"h": strings.Repeat("h", 1<<20)}
	for name, q := range map[string]queue.AckQueue{"embedded": emb, "redis": red} {
		_, err := q.Enqueue(ctx, make([]byte, max+1))
		require.ErrorIs(t, err, queue.ErrTooLarge, name)
		_, err = q.Enqueue(ctx, make([]byte, max))
		require.NoError(t, err, name)
		m, err := q.TryDequeue()
		require.NoError(t, err, name)
		require.Len(t, m.Payload, max, name)
		require.NoError(t, m.Ack(), name)

		_, err = q.Enqueue(ctx, make([]byte, max), queue.WithHeaders(big))
		if name == "embedded" {
			require.ErrorIs(t, err, queue.ErrTooLarge, name)
		} else {
			require.NoError(t, err, name)
			m, err := q.TryDequeue()
			require.NoError(t, err, name)
			require.Equal(t, big, m.Headers)
			require.NoError(t, m.Ack(), name)
		}
		_, err = q.Enqueue(ctx, []byte("x"))
		require.NoError(t, err, name)
		m, err = q.TryDequeue()
		require.NoError(t, err, name)
		err = m.DeadLetter(strings.Repeat("r", max+1<<20))
		if name == "embedded" {
			require.ErrorIs(t, err, queue.ErrTooLarge, name)
		} else {
			require.NoError(t, err, name)
		}
		_, err = q.Enqueue(ctx, make([]byte, max), queue.WithID(strings.Repeat("i", 1<<20)))
		if name == "embedded" {
			require.ErrorIs(t, err, queue.ErrTooLarge, name)
		} else {
			require.NoError(t, err, name)
		}
	}
	sortedRecordLimit(t, srv.Client())
}

// sortedRecordLimit: a sorted queue's message key long enough to make a
// record too long is refused by both, with queue.ErrTooLarge by the
// embedded queue and with queue.ErrInvalidOptions by Redis (its key
// limit); a batch's dead-letter reason is refused by the embedded queue
// alone.
func sortedRecordLimit(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	emb, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{Options: queue.Options{Sync: queue.SyncNever}})
	require.NoError(t, err)
	defer emb.Close()
	red, err := redisq.OpenSorted[int64](ctx, rdb, "limits-sorted", &redisq.SortedOptions{Options: redisq.Options{ManualRequeue: true}})
	require.NoError(t, err)
	defer red.Close()
	const max = 4 << 20
	for name, q := range map[string]queue.SortedQueue[int64]{"embedded": emb, "redis": red} {
		err := q.Publish(ctx, 1, strings.Repeat("k", 1<<20), make([]byte, max))
		want := queue.ErrTooLarge
		if name == "redis" {
			want = queue.ErrInvalidOptions
		}
		require.ErrorIs(t, err, want, name)
		require.NoError(t, q.Publish(ctx, 1, "a", []byte("x")), name)
		bs, err := q.TryPull(10)
		require.NoError(t, err, name)
		require.Len(t, bs, 1, name)
		err = bs[0].DeadLetter(strings.Repeat("r", max+1<<20))
		if name == "embedded" {
			require.ErrorIs(t, err, queue.ErrTooLarge, name)
		} else {
			require.NoError(t, err, name)
		}
	}
}
