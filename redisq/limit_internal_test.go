package redisq

import (
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestLimitGarbledDeliveryCount: a ready message whose delivery count was
// overwritten by hand is dead-lettered by a dequeue as a message past the
// limit, with the count as a number in the reason, when the count reads
// as one (leading zeros), and as a corrupt record when it has more digits
// than a count can have; either way its record stays readable by the
// scripts (a count of 20 digits was rewritten negative) and the next
// message is delivered.
func TestLimitGarbledDeliveryCount(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	for _, tc := range []struct{ count, reason string }{
		{"003", "3 deliveries, limit 3; not delivered again"},
		{"9223372036854775807", "corrupt record: unreadable"},
		{"99999999999999999999", "corrupt record: unreadable"},
		{"1234567890", "corrupt record: unreadable"},
	} {
		t.Run(tc.count, func(t *testing.T) {
			q, err := Open(ctx, rdb, "garbled-count-"+tc.count, &Options{MaxDeliveries: 3, ManualRequeue: true})
			require.NoError(t, err)
			defer q.Close()
			for _, p := range []string{"a", "b"} {
				_, err := q.Enqueue(ctx, []byte(p), queue.WithID(p))
				require.NoError(t, err)
			}
			raw, err := rdb.HGet(ctx, q.keys[1], "1").Result()
			require.NoError(t, err)
			garbled := regexp.MustCompile(`^([01]):\d+:`).ReplaceAllString(raw, "${1}:"+tc.count+":")
			require.NoError(t, rdb.HSet(ctx, q.keys[1], "1", garbled).Err())
			m, err := q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, "b", string(m.Payload))
			dead, err := q.DeadLetters(0, 10)
			require.NoError(t, err)
			require.Len(t, dead, 1)
			require.Equal(t, "a", dead[0].ID)
			require.Equal(t, tc.reason, dead[0].Reason)
			raw, err = rdb.HGet(ctx, q.keys[1], "1").Result()
			require.NoError(t, err)
			require.Regexp(t, `^[01]:\d{1,9}:`, raw, "the dead record reads")
			require.NoError(t, q.RequeueDead("a"))
			m, err = q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, "a", string(m.Payload))
		})
	}
}
