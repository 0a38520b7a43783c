package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestStatsCountsDueDelayedReady nacks a message with a delay, enqueues
// one with a deliver-at time, and steps the clock past both with no
// dequeue or housekeeping between: Stats counts them Ready, not
// Delayed, on Redis as on the embedded queue (Stats.Ready: "delayed
// messages whose time has come included"). The Redis handle's clock has
// no timers, so that stepping it wakes no housekeeper, and the delays
// are longer than the idle recheck its housekeeper arms for as it opens
// (30s), so that their announcements do not wake it either.
func TestStatsCountsDueDelayedReady(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	clock := queuetest.NewClock()
	emb, err := queue.Open(t.TempDir(), &queue.Options{Sync: queue.SyncNever, Clock: clock})
	require.NoError(t, err)
	defer emb.Close()
	red, err := redisq.Open(ctx, srv.Client(), t.Name(), &redisq.Options{ManualRequeue: true, Clock: noTimers{clock}})
	require.NoError(t, err)
	defer red.Close()
	counts := func() [2][2]int64 {
		es, rs := emb.Stats(), red.Stats()
		return [2][2]int64{{es.Ready, es.Delayed}, {rs.Ready, rs.Delayed}}
	}
	for _, e := range []queue.AckQueue{emb, red} {
		_, err := e.Enqueue(ctx, []byte("nacked"))
		require.NoError(t, err)
		m, err := e.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.Nack(time.Minute))
		_, err = e.Enqueue(ctx, []byte("later"), queue.WithDelay(3*time.Minute))
		require.NoError(t, err)
	}
	require.Equal(t, [2][2]int64{{0, 2}, {0, 2}}, counts(), "both delayed")
	clock.Advance(2 * time.Minute)
	require.Equal(t, [2][2]int64{{1, 1}, {1, 1}}, counts(), "the nack delay passed")
	clock.Advance(time.Minute)
	require.Equal(t, [2][2]int64{{2, 0}, {2, 0}}, counts(), "the deliver-at time reached")
}

// noTimers is a manual clock whose timers never fire: a handle on it
// runs its housekeeper once, as it opens, and never again, so that a
// test sees what the calls alone do as the clock is stepped.
type noTimers struct{ *queuetest.Clock }

func (noTimers) After(time.Duration) <-chan time.Time { return nil }
