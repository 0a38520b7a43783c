package redisq_test

import (
	"context"
	"sort"
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

// TestFirstPublishSeqRefusedFirst: the first publish of a sorted or
// windowed queue writes the placeholders of its hashes before its INCR
// of the counter; on a queue that never published whose counter holds
// text, or another type, it is refused naming the counter and leaves
// the queue's keys as they were (no placeholder behind, no misleading
// report of a deleted key); mended, it goes on.
func TestFirstPublishSeqRefusedFirst(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	type spoil struct {
		name  string
		stats func(stats string) error // what stats holds beside
		seq   func(seq string) error
		want  func(seq string) string
		bad   error // the sentinel of the refusal, nil: none (a WRONGTYPE)
	}
	text := func(seq string) error { return rdb.Set(ctx, seq, "many", 0).Err() }
	cases := []spoil{
		{"text", func(string) error { return nil }, text,
			func(seq string) string { return "queue key " + seq + ` holds "many", not a count` }, queue.ErrCorrupt},
		{"text counted 0", func(stats string) error { return rdb.HSet(ctx, stats, "published", "0").Err() }, text,
			func(seq string) string { return "queue key " + seq + ` holds "many", not a count` }, queue.ErrCorrupt},
		{"hash", func(string) error { return nil }, func(seq string) error { return rdb.HSet(ctx, seq, "f", "v").Err() },
			func(seq string) string { return "WRONGTYPE queue key " + seq + " holds another type, not a string" }, nil},
		// 19 digits that INCR refuses: past the int64 range, or at its
		// end (the INCR would overflow).
		{"out of range", func(string) error { return nil }, func(seq string) error { return rdb.Set(ctx, seq, "9999999999999999999", 0).Err() },
			func(seq string) string { return "queue key " + seq + ` holds "9999999999999999999", not a count` }, queue.ErrCorrupt},
		{"at the end of the range counted 0", func(stats string) error { return rdb.HSet(ctx, stats, "published", "0").Err() }, func(seq string) error { return rdb.Set(ctx, seq, "9223372036854775807", 0).Err() },
			func(seq string) string { return "queue key " + seq + ` holds "9223372036854775807", not a count` }, queue.ErrCorrupt},
		{"below the range", func(string) error { return nil }, func(seq string) error { return rdb.Set(ctx, seq, "-9223372036854775809", 0).Err() },
			func(seq string) string { return "queue key " + seq + ` holds "-9223372036854775809", not a count` }, queue.ErrCorrupt},
	}
	for _, form := range []string{"sorted", "windowed"} {
		for _, c := range cases {
			t.Run(form+" "+c.name, func(t *testing.T) {
				name := "first-seq-" + form + "-" + strings.ReplaceAll(c.name, " ", "-")
				s, publish, err := openLostForm(ctx, srv, form, name)
				require.NoError(t, err)
				defer s.Close()
				seq, stats := "walq:{"+name+"}:s:seq", "walq:{"+name+"}:s:stats"
				require.NoError(t, c.seq(seq))
				require.NoError(t, c.stats(stats))
				before := queueKeys(t, rdb, name)
				err = publish("k")
				if c.bad != nil {
					require.ErrorIs(t, err, c.bad)
				}
				require.ErrorContains(t, err, c.want(seq))
				require.Equal(t, before, queueKeys(t, rdb, name), "the refused publish wrote no key")
				require.NoError(t, rdb.Del(ctx, seq).Err())
				require.NoError(t, publish("k"), "the first publish once the counter is mended")
				st, err := s.StatsContext(ctx)
				require.NoError(t, err)
				require.Equal(t, 1, st.SortedPending)
			})
		}
	}
}

// queueKeys returns the keys of the queue name (its hash tag), sorted,
// each with its type.
func queueKeys(t *testing.T, rdb redis.UniversalClient, name string) []string {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "walq:{"+name+"}:*").Result()
	require.NoError(t, err)
	for i, k := range keys {
		keys[i] = k + " " + rdb.Type(ctx, k).Val()
	}
	sort.Strings(keys)
	return keys
}
