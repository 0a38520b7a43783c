package redisq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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

// openOneLeased opens the ack queue name (ManualRequeue, closed when t
// ends), enqueues one message and dequeues it: the queue holds it leased.
func openOneLeased(ctx context.Context, t *testing.T, rdb *redis.Client, name string) (*redisq.Queue, *queue.Message) {
	t.Helper()
	q, err := redisq.Open(ctx, rdb, name, &redisq.Options{ManualRequeue: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	_, err = q.Enqueue(ctx, []byte("a"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	return q, m
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
		q, m := openOneLeased(ctx, t, rdb, "text-counter")
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
		// The sequence counter, a string key, gives Stats its Enqueued.
		t.Run("seq", func(t *testing.T) {
			seq := "walq:{text-counter}:2:seq"
			old, err := rdb.Get(ctx, seq).Result()
			require.NoError(t, err)
			require.NoError(t, rdb.Set(ctx, seq, "many", 0).Err())
			_, err = q.StatsContext(ctx)
			require.ErrorIs(t, err, queue.ErrCorrupt)
			require.ErrorContains(t, err, "queue key "+seq+` holds "many", not a count`)
			require.ErrorContains(t, err, "SET "+seq)
			require.NoError(t, rdb.Set(ctx, seq, old, 0).Err())
			st, err := q.StatsContext(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 1, st.Enqueued)
		})
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

// TestWriteCounterText: a call that adds to a counter holding text is
// refused with queue.ErrCorrupt naming the key and the field, having
// written nothing (the nacked message stays leased, the published value
// is not there), and goes on once the counter is mended.
func TestWriteCounterText(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	t.Run("ack queue nack", func(t *testing.T) {
		q, m := openOneLeased(ctx, t, rdb, "text-nacked")
		stats := "walq:{text-nacked}:2:stats"
		require.NoError(t, rdb.HSet(ctx, stats, "nacked", "many").Err())
		err := m.Nack(0)
		requireTextCounter(t, err, stats, "nacked")
		require.NoError(t, rdb.HSet(ctx, stats, "nacked", "0").Err())
		st, err := q.StatsContext(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, st.InFlight, "the refused nack gave nothing back")
		require.NoError(t, m.Nack(0))
		st, err = q.StatsContext(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, st.Ready)
		require.EqualValues(t, 1, st.Nacked)
	})
	for _, form := range []string{"sorted", "windowed"} {
		t.Run(form+" publish", func(t *testing.T) {
			name := "text-published-" + form
			s, publish, err := openLostForm(ctx, srv, form, name)
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, publish("k"))
			stats := "walq:{" + name + "}:s:stats"
			require.NoError(t, rdb.HSet(ctx, stats, "published", "many").Err())
			requireTextCounter(t, publish("j"), stats, "published")
			require.NoError(t, rdb.HSet(ctx, stats, "published", "1").Err())
			st, err := s.StatsContext(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, st.SortedPending, "the refused publish wrote nothing")
			require.NoError(t, publish("j"))
			st, err = s.StatsContext(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, st.SortedPending)
			require.EqualValues(t, 2, st.Published)
		})
	}
}

// TestEnqueueSeqText: an enqueue or a publish on a queue whose sequence
// counter (a string key, INCR'd by every enqueue) holds text is refused
// with queue.ErrCorrupt naming the key and how to mend it, not with the
// server's INCR error, having written nothing; mended, it goes on.
func TestEnqueueSeqText(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	requireSeqText := func(t *testing.T, err error, seq string) {
		t.Helper()
		require.ErrorIs(t, err, queue.ErrCorrupt)
		require.ErrorContains(t, err, "queue key "+seq+` holds "many", not a count`)
		require.ErrorContains(t, err, "SET "+seq)
	}
	calls := map[string]func(q *redisq.Queue) error{
		"enqueue": func(q *redisq.Queue) error { _, err := q.Enqueue(ctx, []byte("x")); return err },
		"enqueue with id": func(q *redisq.Queue) error {
			_, err := q.Enqueue(ctx, []byte("x"), queue.WithID("id-x"))
			return err
		},
		"batch": func(q *redisq.Queue) error {
			_, err := q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("x")}, {Payload: []byte("y")}})
			return err
		},
	}
	for name, call := range calls {
		t.Run("ack queue "+name, func(t *testing.T) {
			qn := "text-seq-" + strings.ReplaceAll(name, " ", "-")
			q, err := redisq.Open(ctx, rdb, qn, &redisq.Options{ManualRequeue: true})
			require.NoError(t, err)
			defer q.Close()
			_, err = q.Enqueue(ctx, []byte("a"))
			require.NoError(t, err)
			seq := "walq:{" + qn + "}:2:seq"
			require.NoError(t, rdb.Set(ctx, seq, "many", 0).Err())
			requireSeqText(t, call(q), seq)
			require.Equal(t, "many", rdb.Get(ctx, seq).Val(), "the refused call left the counter")
			require.NoError(t, rdb.Set(ctx, seq, "1", 0).Err())
			st, err := q.StatsContext(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 1, st.Ready, "the refused call enqueued nothing")
			require.NoError(t, call(q))
			st, err = q.StatsContext(ctx)
			require.NoError(t, err)
			require.Greater(t, st.Ready, int64(1))
		})
	}
	for _, form := range []string{"sorted", "windowed"} {
		t.Run(form+" publish", func(t *testing.T) {
			name := "text-seq-" + form
			s, publish, err := openLostForm(ctx, srv, form, name)
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, publish("k"))
			seq := "walq:{" + name + "}:s:seq"
			require.NoError(t, rdb.Set(ctx, seq, "many", 0).Err())
			requireSeqText(t, publish("j"), seq)
			require.NoError(t, rdb.Set(ctx, seq, "1", 0).Err())
			st, err := s.StatsContext(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, st.SortedPending, "the refused publish wrote nothing")
			require.NoError(t, publish("j"))
			st, err = s.StatsContext(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, st.SortedPending)
		})
	}
}
