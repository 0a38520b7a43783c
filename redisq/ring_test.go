package redisq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestRingWaitsOnQueueShard: over a Ring of two shards, a change with
// Replicas waits for the replicas of the shard that holds the queue:
// WAIT goes on the connection of the call's own shard, never to the
// shard a keyless command lands on. Shard b has a replica, shard a none:
// each enqueue on a queue of shard a falls short (ErrNotDurable), each on
// a queue of shard b is confirmed. (Sent through the Ring, WAIT went to a
// random shard: a WAIT on a connection that wrote nothing returns at once
// with every replica of that shard.)
func TestRingWaitsOnQueueShard(t *testing.T) {
	a, b := redistest.Start(t), redistest.Start(t)
	host, port, _ := strings.Cut(b.Addr, ":")
	replica := redistest.Start(t, append(append([]string{}, redistest.Durable...), "--replicaof", host, port)...)
	ctx := context.Background()
	require.Eventually(t, func() bool {
		info, err := replica.Client().Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, 10*time.Second, 20*time.Millisecond)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr, "b": b.Addr}, MaxRetries: -1})
	defer ring.Close()
	require.Eventually(t, func() bool { return ring.Len() == 2 }, 5*time.Second, 10*time.Millisecond)

	// nameOn returns a queue name whose keys the Ring puts on addr.
	nameOn := func(addr string) string {
		for i := 0; ; i++ {
			name := fmt.Sprintf("ring-%d", i)
			c, err := ring.GetShardClientForKey("walq:{" + name + "}:2:seq")
			require.NoError(t, err)
			if c.Options().Addr == addr {
				return name
			}
		}
	}
	// WAIT returns once the replica confirmed: the shard with one is given
	// time for a loaded machine; the shard without waits out each timeout.
	for _, c := range []struct {
		shard, addr string
		durable     bool
		wait        time.Duration
	}{{"b", b.Addr, true, 3 * time.Second}, {"a", a.Addr, false, 200 * time.Millisecond}} {
		t.Run(c.shard, func(t *testing.T) {
			q, err := redisq.Open(ctx, ring, nameOn(c.addr), &redisq.Options{TrustServer: true, Replicas: 1,
				WaitTimeout: c.wait})
			require.NoError(t, err)
			defer q.Close()
			for i := 0; i < 20; i++ {
				_, err := q.Enqueue(ctx, []byte("x"))
				if c.durable {
					require.NoError(t, err, "enqueue %d on the shard with a replica", i)
				} else {
					require.ErrorIs(t, err, redisq.ErrNotDurable, "enqueue %d on the shard without one", i)
				}
			}
		})
	}
}

// TestRingShardDownHidesQueue: a Ring is no failover for a queue. Once
// the Ring finds a shard down it maps that shard's keys to the shards
// left, so the queue's calls run there and find another, empty queue: a
// message enqueued before is not delivered while the shard is down, nor
// is a receipt of it settled, and one enqueued meanwhile stays on the
// other shard, hidden, once the shard is back (the README's failure table, "a Ring shard down").
func TestRingShardDownHidesQueue(t *testing.T) {
	a, b := redistest.Start(t), redistest.Start(t)
	ctx := context.Background()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr, "b": b.Addr}, MaxRetries: -1,
		HeartbeatFrequency: 50 * time.Millisecond})
	defer ring.Close()
	require.Eventually(t, func() bool { return ring.Len() == 2 }, 5*time.Second, 10*time.Millisecond)
	name := ""
	for i := 0; name == ""; i++ {
		c, err := ring.GetShardClientForKey(fmt.Sprintf("walq:{down-%d}:2:seq", i))
		require.NoError(t, err)
		if c.Options().Addr == a.Addr {
			name = fmt.Sprintf("down-%d", i)
		}
	}
	q, err := redisq.Open(ctx, ring, name, &redisq.Options{TrustServer: true})
	require.NoError(t, err)
	defer q.Close()
	for _, p := range []string{"held", "before"} {
		_, err = q.Enqueue(ctx, []byte(p))
		require.NoError(t, err)
	}
	held, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "held", string(held.Payload))

	require.NoError(t, a.Stop())
	require.Eventually(t, func() bool { return ring.Len() == 1 }, 10*time.Second, 10*time.Millisecond)
	_, err = q.Enqueue(ctx, []byte("during"))
	require.NoError(t, err, "an enqueue while shard a is down runs on shard b")
	require.ErrorIs(t, held.Ack(), queue.ErrLeaseLost, "a receipt of shard a while it is down")
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "during", string(m.Payload), "the message enqueued before is not delivered while its shard is down")
	require.NoError(t, m.Nack(0))
	n, err := b.Client().Exists(ctx, "walq:{"+name+"}:2:seq").Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the queue's keys were made on shard b")

	a.Restart()
	require.Eventually(t, func() bool { return ring.Len() == 2 }, 10*time.Second, 10*time.Millisecond)
	m, err = q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "before", string(m.Payload), "with shard a back, its queue is delivered again")
	require.NoError(t, m.Ack())
	require.NoError(t, held.Ack(), "shard a's receipt settles again once it is back, while its lease lives")
	_, err = q.TryDequeue()
	require.ErrorIs(t, err, queue.ErrEmpty, "the message enqueued during the outage is hidden on shard b")
	st, err := redisq.Open(ctx, b.Client(), name, &redisq.Options{TrustServer: true, ReadOnly: true})
	require.NoError(t, err)
	defer st.Close()
	s, err := st.StatsContext(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, s.Ready, "shard b still holds it")
}
