package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestStatsCounters: the counts of enqueued and acked messages are derived
// from the sequence counter and what is live (see scripts/common.lua), so
// a purge, a requeued dead letter, an AckID and a refused duplicate must
// each leave them where the embedded queue would.
func TestStatsCounters(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	q, err := redisq.Open(ctx, srv.Client(), "counters", &redisq.Options{MaxDeliveries: 1})
	require.NoError(t, err)
	defer q.Close()
	for _, id := range []string{"a", "b", "c", "d"} {
		_, err := q.Enqueue(ctx, []byte(id), queue.WithID(id))
		require.NoError(t, err)
	}
	_, err = q.Enqueue(ctx, []byte("a"), queue.WithID("a"))
	require.ErrorIs(t, err, queue.ErrDuplicate)
	next := func() *queue.Message {
		t.Helper()
		m, err := q.TryDequeue()
		require.NoError(t, err)
		return m
	}
	steps := []struct {
		name                       string
		do                         func()
		enqueued, delivered, acked uint64
	}{
		{"ack", func() { require.NoError(t, next().Ack()) }, 4, 1, 1},
		{"dead letter, purged", func() {
			require.NoError(t, next().Nack(0))
			require.NoError(t, q.PurgeDead("b"))
		}, 4, 2, 1},
		{"ack by id", func() {
			next()
			require.NoError(t, q.AckID("c"))
		}, 4, 3, 2},
		{"dead letter, requeued, acked", func() {
			require.NoError(t, next().Nack(0))
			n, err := q.RequeueAllDead()
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.NoError(t, next().Ack())
		}, 4, 5, 3},
		{"batch", func() {
			_, err := q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("e")}, {Payload: []byte("f")}})
			require.NoError(t, err)
			ms, err := q.DequeueBatch(ctx, 2)
			require.NoError(t, err)
			require.NoError(t, ms.Ack())
		}, 6, 7, 5},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.do()
			st, err := q.StatsContext(ctx)
			require.NoError(t, err)
			require.Equal(t, s.enqueued, st.Enqueued, "enqueued")
			require.Equal(t, s.delivered, st.Delivered, "delivered")
			require.Equal(t, s.acked, st.Acked, "acked")
		})
	}
}

// TestStatsCountersNeverWrap: Stats derives Acked from the sequence
// counter (every message ever enqueued) less the live and purged ones;
// when an operator deleted that counter or lowered it by hand, or wrote
// another counter below zero, the difference is below zero. A counter
// that reads below zero is reported as 0, never as a count near 2^64
// that a dashboard or a rate() would take at its word, and CountsErr,
// wrapping queue.ErrCorrupt, names the damage (a lowered counter gives
// the next enqueue the seq of a live message); the other counts stay as
// they are.
func TestStatsCountersNeverWrap(t *testing.T) {
	ctx := context.Background()
	const pre = "walq:{nowrap}:2:"
	for _, c := range []struct {
		name   string
		damage func(rdb *redis.Client) error
		want   func(t *testing.T, s queue.Stats)
		key    string // what CountsErr names
	}{
		{"sequence counter deleted", func(rdb *redis.Client) error { return rdb.Del(ctx, pre+"seq").Err() },
			func(t *testing.T, s queue.Stats) {
				require.Zero(t, s.Acked, "%+v", s)
				require.Zero(t, s.Enqueued)
				require.Equal(t, uint64(1), s.Delivered)
			}, pre + "seq"},
		{"sequence counter lowered", func(rdb *redis.Client) error { return rdb.Set(ctx, pre+"seq", 1, 0).Err() },
			func(t *testing.T, s queue.Stats) {
				require.Zero(t, s.Acked, "%+v", s)
				require.Equal(t, uint64(1), s.Enqueued)
				require.Equal(t, uint64(1), s.Delivered)
			}, pre + "seq"},
		{"deliveries counter below zero", func(rdb *redis.Client) error { return rdb.HSet(ctx, pre+"msg", "#d", -5).Err() },
			func(t *testing.T, s queue.Stats) {
				require.Zero(t, s.Delivered, "%+v", s)
				require.Equal(t, uint64(3), s.Enqueued)
				require.Equal(t, uint64(1), s.Acked)
			}, "delivered reads -5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client()
			q, err := redisq.Open(ctx, rdb, "nowrap", &redisq.Options{AckTimeout: time.Minute})
			require.NoError(t, err)
			defer q.Close()
			for _, id := range []string{"a", "b", "c"} {
				_, err := q.Enqueue(ctx, []byte(id), queue.WithID(id))
				require.NoError(t, err)
			}
			m, err := q.TryDequeue()
			require.NoError(t, err)
			require.NoError(t, m.Ack())
			s, err := q.StatsContext(ctx)
			require.NoError(t, err)
			require.NoError(t, s.CountsErr, "before the damage")
			require.NoError(t, c.damage(rdb))
			s, err = q.StatsContext(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(2), s.Ready, "%+v", s)
			c.want(t, s)
			require.ErrorIs(t, s.CountsErr, queue.ErrCorrupt, "%+v", s)
			require.ErrorContains(t, s.CountsErr, c.key)
		})
	}
}
