package redisq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
)

// TestClusterMoveWaitQueued: while the queue's slot is held in migration,
// an Enqueue or a lone Dequeue that queued behind a call of the same kind
// waiting to be sent again (concurrent calls of a handle go to the server
// together, one call at a time) returns its context's error when its
// context ends, not when the call ahead of it gives up (OpTimeout). The
// refused calls left the queue as it was.
func TestClusterMoveWaitQueued(t *testing.T) {
	cc := startCluster(t)
	ctx := context.Background()
	const name = "movequeued"
	opTimeout := 2500 * time.Millisecond
	q, err := redisq.Open(ctx, cc, name, &redisq.Options{OpTimeout: opTimeout, AckTimeout: time.Minute})
	require.NoError(t, err)
	defer q.Close()
	key := "walq:{" + name + "}:seq"
	owner, err := cc.MasterForKey(ctx, key)
	require.NoError(t, err)
	slot, err := owner.ClusterKeySlot(ctx, key).Result()
	require.NoError(t, err)
	nodes, err := owner.ClusterNodes(ctx).Result()
	require.NoError(t, err)
	var other string
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && strings.Contains(f[2], "master") && !strings.Contains(f[2], "myself") {
			other = f[0]
			break
		}
	}
	require.NotEmpty(t, other)
	require.NoError(t, owner.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", other).Err())
	defer owner.Do(ctx, "CLUSTER", "SETSLOT", slot, "STABLE")

	for _, c := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Enqueue", func(ctx context.Context) error { _, err := q.Enqueue(ctx, []byte("x"), queue.WithID("x")); return err }},
		{"Dequeue", func(ctx context.Context) error { _, err := q.Dequeue(ctx); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ahead := make(chan error, 1)
			go func() { ahead <- c.call(ctx) }() // rides until OpTimeout
			time.Sleep(200 * time.Millisecond)
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := c.call(cctx)
			took := time.Since(start)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Less(t, took, 300*time.Millisecond+rideSlack,
				"returns when its context ends, not when the call ahead gives up (%v)", err)
			require.Error(t, <-ahead, "the call ahead was refused until OpTimeout")
		})
	}
	require.NoError(t, owner.Do(ctx, "CLUSTER", "SETSLOT", slot, "STABLE").Err())
	s, err := q.StatsContext(ctx)
	require.NoError(t, err)
	require.Zero(t, s.Ready+s.InFlight, "the refused calls ran nothing")
}
