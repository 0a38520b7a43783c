package redisq_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// lostKeyQueue opens the ack queue name on a new server and fills it:
// two messages ready, one delayed, one leased (returned), one dead.
func lostKeyQueue(t *testing.T, name string) (*redistest.Server, *redisq.Queue, *queue.Message) {
	t.Helper()
	ctx := context.Background()
	srv := redistest.Start(t)
	q, err := redisq.Open(ctx, srv.Client(), name, &redisq.Options{AckTimeout: time.Minute, ManualRequeue: true})
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	for _, p := range []string{"leased", "dead", "ready-1", "ready-2"} {
		_, err = q.Enqueue(ctx, []byte(p), queue.WithID(p))
		require.NoError(t, err)
	}
	_, err = q.Enqueue(ctx, []byte("delayed"), queue.WithDelay(time.Hour))
	require.NoError(t, err)
	leased, err := q.TryDequeue()
	require.NoError(t, err)
	dead, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, dead.DeadLetter("test"))
	return srv, q, leased
}

// TestLostKey: an operator (or a stray DEL, FLUSHDB of a few keys, an
// EXPIRE that ran out) deletes a key of an ack queue that holds messages:
// the message hash (records and bodies), the ready set or the lease set,
// or the three at once with the counter left. The queue must not go on as
// if nothing happened, losing the messages those keys held without a
// word: the next call of every kind (enqueue, dequeue, nack, stats, the
// dead letters, Open) fails with queue.ErrCorrupt, naming the key, and
// writes nothing. The calls that run for one message carry only the keys
// they touch, and look at those: a lone enqueue (not lease, which it
// leaves right), a lone dequeue (no counter) and a lone ack (neither
// ready nor the counter), which a lost ready set leaves right.
func TestLostKey(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		deleted []string // key names after walq:{NAME}:2:
		enqueue bool     // an enqueue of generated ids, which writes seq, msg and ready, tells too
		dequeue bool     // a lone dequeue, which carries no counter, tells too
		ack     bool     // a lone ack, which carries msg and lease alone, tells too
	}{
		{"msg", []string{"msg"}, true, true, true},
		{"ready", []string{"ready"}, true, true, false},
		{"lease", []string{"lease"}, false, true, true},
		{"msg, ready and lease", []string{"msg", "ready", "lease"}, true, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "lostkey-" + strings.ReplaceAll(c.name, " ", "")
			srv, q, leased := lostKeyQueue(t, name)
			rdb := srv.Client()
			var keys []string
			for _, k := range c.deleted {
				keys = append(keys, "walq:{"+name+"}:2:"+k)
			}
			require.NoError(t, rdb.Del(ctx, keys...).Err())
			before := keyContents(t, rdb, "walq:{"+name+"}*")

			if c.enqueue {
				_, err := q.Enqueue(ctx, []byte("new"))
				requireLost(t, err, keys, "a lone enqueue")
			}
			_, err := q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("a")}, {ID: "p", Payload: []byte("b"), Delay: time.Hour}})
			requireLost(t, err, keys, "a batch")
			if c.enqueue {
				_, err = q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("a")}, {Payload: []byte("b")}})
				requireLost(t, err, keys, "a batch of generated ids")
			}
			if c.dequeue {
				_, err = q.TryDequeue()
				requireLost(t, err, keys, "a lone dequeue")
			}
			if c.ack {
				requireLost(t, leased.Ack(), keys, "an ack")
			}
			requireLost(t, leased.Nack(0), keys, "a nack")
			_, err = q.DequeueBatch(ctx, 10)
			requireLost(t, err, keys, "a batch dequeue")
			_, err = q.StatsContext(ctx)
			requireLost(t, err, keys, "stats")
			_, err = q.DeadLetters(0, 10)
			requireLost(t, err, keys, "the dead-letter listing")
			_, err = redisq.Open(ctx, rdb, name, nil)
			requireLost(t, err, keys, "Open")
			require.Equal(t, before, keyContents(t, rdb, "walq:{"+name+"}*"), "a refused call wrote nothing")
		})
	}
}

// TestLostKeyDrainedQueue: a queue whose every message was acked still
// refuses a dequeue once its lease set is deleted: what tells a lost key
// from a new queue is the placeholders, not a live message; the
// operator's way out, writing the placeholder back as the error says,
// makes the queue work again.
func TestLostKeyDrainedQueue(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	q, err := redisq.Open(ctx, rdb, "lostkey-drained", &redisq.Options{ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("a"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.Ack())
	lease := "walq:{lostkey-drained}:2:lease"
	require.NoError(t, rdb.Del(ctx, lease).Err())
	_, err = q.Enqueue(ctx, []byte("b")) // writes no lease
	require.NoError(t, err)
	_, err = q.TryDequeue()
	requireLost(t, err, []string{lease}, "a dequeue")
	_, err = q.StatsContext(ctx)
	requireLost(t, err, []string{lease}, "stats")

	require.NoError(t, rdb.ZAdd(ctx, lease, redis.Z{Score: math.Inf(1), Member: strings.Repeat("~", 256)}).Err())
	m, err = q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "b", string(m.Payload))
	require.NoError(t, m.Ack())
}

// requireLost checks that err reports the loss of one of keys.
func requireLost(t *testing.T, err error, keys []string, what string) {
	t.Helper()
	require.ErrorIs(t, err, queue.ErrCorrupt, "%s after a key was deleted", what)
	for _, k := range keys {
		if strings.Contains(err.Error(), "queue key "+k+" was deleted") {
			return
		}
	}
	t.Fatalf("%s: the error %q names none of the deleted keys %v", what, err, keys)
}
