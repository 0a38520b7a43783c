package redisq_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// retryingNodes is a NewClient hook that builds node clients sending a
// command again after their connection dropped (MaxRetries 3), whatever
// the options the cluster or ring client gives them.
func retryingNodes(opt *redis.Options) *redis.Client {
	o := *opt
	o.MaxRetries = 3
	return redis.NewClient(&o)
}

// TestOpenRefusesRetryingNodeClients: a cluster client or Ring of
// MaxRetries -1 whose NewClient hook builds node clients that retry is
// refused as a retrying client is (the node client sends the call again
// on a new connection), and opens with AcceptDoubleRuns; with a hook
// that keeps MaxRetries -1 it opens.
func TestOpenRefusesRetryingNodeClients(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	cc := startCluster(t)
	for _, c := range []struct {
		name string
		make func(hook func(*redis.Options) *redis.Client) redis.UniversalClient
	}{
		{"Ring", func(hook func(*redis.Options) *redis.Client) redis.UniversalClient {
			return redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": srv.Addr}, MaxRetries: -1, NewClient: hook})
		}},
		{"Cluster", func(hook func(*redis.Options) *redis.Client) redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cc.Options().Addrs, MaxRetries: -1,
				MaxRedirects: -1, NewClient: hook})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rdb := c.make(retryingNodes)
			defer rdb.Close()
			requireRetriesRefused(t, openAll(ctx, rdb, redisq.Options{}), "retrying node clients")
			for _, err := range openAll(ctx, rdb, redisq.Options{AcceptDoubleRuns: true}) {
				require.NoError(t, err)
			}
			plain := c.make(func(opt *redis.Options) *redis.Client { return redis.NewClient(opt) })
			defer plain.Close()
			for _, err := range openAll(ctx, plain, redisq.Options{}) {
				require.NoError(t, err)
			}
		})
	}
}
