package redisq

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq/internal/redistest"
)

// Stats reads the oldest live message's enqueue time from its stored
// body. A body that did not decode failed StatsContext, which Stats
// dropped: the counts came back without the lifetime counters, and with
// no OldestEnqueuedAt and no error; a missing body left OldestEnqueuedAt
// zero without a word. Both now set Stats.OldestErr, wrapping
// queue.ErrCorrupt, beside the counts and counters, as the embedded queue
// does for a record it cannot read.
func TestStatsOldestBodyDamaged(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	for i, c := range corruptions {
		if c.name != "body deleted" && c.name != "body undecodable" {
			continue // Stats reads only the body
		}
		t.Run(c.name, func(t *testing.T) {
			clock := queuetest.NewClock()
			q, err := Open(ctx, rdb, "stats-oldest-"+string(rune('a'+i)), &Options{Clock: clock})
			require.NoError(t, err)
			defer q.Close()
			_, err = q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("a")}, {Payload: []byte("b")}})
			require.NoError(t, err)
			require.NoError(t, c.damage(ctx, rdb, q, "1"))

			s, err := q.StatsContext(ctx)
			require.NoError(t, err)
			require.ErrorIs(t, s.OldestErr, queue.ErrCorrupt)
			require.ErrorContains(t, s.OldestErr, "message 1")
			require.True(t, s.OldestEnqueuedAt.IsZero(), "OldestEnqueuedAt %v", s.OldestEnqueuedAt)
			require.EqualValues(t, 2, s.Ready)
			require.EqualValues(t, 2, s.Enqueued, "the counters are read too")
			require.ErrorIs(t, q.Stats().OldestErr, queue.ErrCorrupt)
		})
	}
}
