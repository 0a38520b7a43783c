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

// TestRecordLimitDiffers pins a difference from the embedded queue: both
// hold a payload to MaxMessageSize (queue.ErrTooLarge at one byte more),
// and the embedded queue also refuses, with queue.ErrTooLarge, a record
// that its headers, id or dead-letter reason make longer than
// MaxMessageSize plus 1 MiB, which Redis takes.
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
	}
}
