package redisq_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// startCluster starts three redis-server masters with cluster mode on,
// joins them with redis-cli --cluster create (the slots split in three),
// and returns a cluster client once every node reports cluster_state:ok.
func startCluster(t *testing.T) *redis.ClusterClient {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		// Debian's redis-server package depends on redis-tools, which has it.
		t.Fatal("redis-cli is not on PATH; it comes with redis-server (redis-tools)")
	}
	args := append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"}, redistest.Durable...)
	var addrs []string
	for range 3 {
		addrs = append(addrs, redistest.Start(t, args...).Addr)
	}
	out, err := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...), "--cluster-yes")...).CombinedOutput()
	require.NoError(t, err, "redis-cli --cluster create: %s", out)
	ctx := context.Background()
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		require.Eventually(t, func() bool {
			info, err := c.ClusterInfo(ctx).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		}, 30*time.Second, 50*time.Millisecond, "node %s joins the cluster", a)
		require.NoError(t, c.Close())
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// TestCluster runs the ack queue's conformance suite over a Redis Cluster
// of three masters: every queue's keys share one hash tag, so each
// script runs on the one master that owns the queue's slot, and the
// queues of the suite spread over all three.
func TestCluster(t *testing.T) {
	cc := startCluster(t)
	owners := map[string]bool{}
	queuetest.TestAckQueue(t, queuetest.Engine{
		Open: func(t *testing.T, o queuetest.Options) (queue.AckQueue, func() queue.AckQueue) {
			name := fmt.Sprint("cluster-", queueNames.Add(1))
			opts := &redisq.Options{AckTimeout: o.AckTimeout, MaxDeliveries: o.MaxDeliveries,
				DedupWindow: o.DedupWindow, Clock: o.Clock, ManualRequeue: true}
			q, err := redisq.Open(context.Background(), cc, name, opts)
			require.NoError(t, err)
			m, err := cc.MasterForKey(context.Background(), "walq:{"+name+"}:seq")
			require.NoError(t, err)
			owners[m.Options().Addr] = true
			return q, func() queue.AckQueue {
				q2, err := redisq.Open(context.Background(), cc, name, opts)
				require.NoError(t, err)
				t.Cleanup(func() { _ = q2.Close() })
				return q2
			}
		},
	})
	require.Len(t, owners, 3, "the suite's queues live on every master")
}
