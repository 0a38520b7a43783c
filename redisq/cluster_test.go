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
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		require.Eventually(t, func() bool {
			info, err := c.ClusterInfo(ctx).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		}, 30*time.Second, 50*time.Millisecond, "node %s joins the cluster", a)
		require.NoError(t, c.Close())
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1, MaxRedirects: -1})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// TestCluster runs the conformance suites of the ack, sorted and windowed
// queues over a Redis Cluster of three masters: every queue's keys share
// one hash tag, so each script runs on the one master that owns the
// queue's slot, and the queues of each suite spread over the masters.
func TestCluster(t *testing.T) {
	cc := startCluster(t)
	ctx := context.Background()
	owners := map[string]map[string]bool{}
	owned := func(suite string) func(t *testing.T, name string) {
		owners[suite] = map[string]bool{}
		return func(t *testing.T, name string) {
			m, err := cc.MasterForKey(ctx, "walq:{"+name+"}:seq")
			require.NoError(t, err)
			owners[suite][m.Options().Addr] = true
		}
	}
	t.Run("LibraryOnEveryMaster", func(t *testing.T) {
		// Before any other queue: Open loads the library into every
		// master, not only the one its queue lives on.
		q, err := redisq.Open(ctx, cc, "cluster-first", nil)
		require.NoError(t, err)
		require.NoError(t, q.Close())
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "walq_*"}).Result()
			if err == nil && len(libs) != 1 {
				err = fmt.Errorf("%s holds %d libraries", c.Options().Addr, len(libs))
			}
			return err // the ack queue's: no sorted queue was opened yet
		})
		require.NoError(t, err)
	})
	t.Run("AckQueue", func(t *testing.T) {
		seen := owned("ack")
		queuetest.TestAckQueue(t, queuetest.Engine{
			Open: func(t *testing.T, o queuetest.Options) (queue.AckQueue, func() queue.AckQueue) {
				name := fmt.Sprint("cluster-", queueNames.Add(1))
				seen(t, name)
				opts := &redisq.Options{AckTimeout: o.AckTimeout, MaxDeliveries: o.MaxDeliveries,
					DedupWindow: o.DedupWindow, Clock: o.Clock, ManualRequeue: true}
				q, err := redisq.Open(ctx, cc, name, opts)
				require.NoError(t, err)
				return q, func() queue.AckQueue {
					q2, err := redisq.Open(ctx, cc, name, opts)
					require.NoError(t, err)
					t.Cleanup(func() { _ = q2.Close() })
					return q2
				}
			},
		})
		require.Len(t, owners["ack"], 3, "the suite's queues live on every master")
	})
	t.Run("Sorted", func(t *testing.T) {
		queuetest.TestSorted(t, sortedEngine(cc, "cluster-", owned("sorted")))
		// About a dozen queues: all on one master would be one chance in
		// some 10^5, all three masters hit is likely but not sure.
		require.GreaterOrEqual(t, len(owners["sorted"]), 2, "the suite's queues live on more than one master")
	})
	t.Run("MasterWithoutLibrary", func(t *testing.T) {
		// A master that never had the library, as one added to the
		// cluster after the handle was opened.
		name := fmt.Sprint("cluster-", queueNames.Add(1))
		q, err := redisq.Open(ctx, cc, name, &redisq.Options{ManualRequeue: true})
		require.NoError(t, err)
		defer q.Close()
		m, err := cc.MasterForKey(ctx, "walq:{"+name+"}:seq")
		require.NoError(t, err)
		require.NoError(t, m.FunctionFlush(ctx).Err())
		roundTrip(t, q)
	})
}
