package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// requireTextCounter checks that err reports the counter field of key
// holding text, as queue.ErrCorrupt, and how to mend it.
func requireTextCounter(t *testing.T, err error, key, field string) {
	t.Helper()
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.ErrorContains(t, err, "queue key "+key+" field "+field+` holds "many", not a count`)
	require.ErrorContains(t, err, "HSET "+key+" "+field+" 0")
}

// TestStatsCounterText: a counter that Stats reads, set to text by hand
// or by other software, makes Stats fail with queue.ErrCorrupt naming its
// key and field, not with the server's Lua error; mended, Stats reads
// again.
func TestStatsCounterText(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	t.Run("ack queue", func(t *testing.T) {
		q, err := redisq.Open(ctx, rdb, "text-counter", &redisq.Options{ManualRequeue: true})
		require.NoError(t, err)
		defer q.Close()
		_, err = q.Enqueue(ctx, []byte("a"))
		require.NoError(t, err)
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.Nack(0))
		stats, msg := "walq:{text-counter}:2:stats", "walq:{text-counter}:2:msg"
		for _, c := range []struct{ key, field string }{
			{stats, "nacked"}, {stats, "expired"}, {stats, "dead"}, {stats, "purged"}, {stats, "pids"}, {msg, "#d"},
		} {
			t.Run(c.field, func(t *testing.T) {
				old, err := rdb.HGet(ctx, c.key, c.field).Result()
				if err != nil {
					old = "0"
				}
				require.NoError(t, rdb.HSet(ctx, c.key, c.field, "many").Err())
				_, err = q.StatsContext(ctx)
				requireTextCounter(t, err, c.key, c.field)
				require.NoError(t, rdb.HSet(ctx, c.key, c.field, old).Err())
				st, err := q.StatsContext(ctx)
				require.NoError(t, err)
				require.EqualValues(t, 1, st.Ready)
			})
		}
	})
	for _, form := range []string{"sorted", "windowed"} {
		t.Run(form, func(t *testing.T) {
			name := "text-counter-" + form
			s, publish, err := openLostForm(ctx, srv, form, name)
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, publish("k"))
			time.Sleep(time.Millisecond)
			_, err = s.TryPull(1)
			require.NoError(t, err)
			stats := "walq:{" + name + "}:s:stats"
			for _, field := range []string{"published", "pulled", "acked", "leased"} {
				t.Run(field, func(t *testing.T) {
					old, err := rdb.HGet(ctx, stats, field).Result()
					if err != nil {
						old = "0"
					}
					require.NoError(t, rdb.HSet(ctx, stats, field, "many").Err())
					_, err = s.StatsContext(ctx)
					requireTextCounter(t, err, stats, field)
					require.NoError(t, rdb.HSet(ctx, stats, field, old).Err())
					st, err := s.StatsContext(ctx)
					require.NoError(t, err)
					require.Equal(t, 1, st.SortedBatches)
				})
			}
		})
	}
}
