package redisq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
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
	for _, c := range []struct {
		shard, addr string
		durable     bool
	}{{"b", b.Addr, true}, {"a", a.Addr, false}} {
		t.Run(c.shard, func(t *testing.T) {
			q, err := redisq.Open(ctx, ring, nameOn(c.addr), &redisq.Options{TrustServer: true, Replicas: 1,
				WaitTimeout: 200 * time.Millisecond})
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
