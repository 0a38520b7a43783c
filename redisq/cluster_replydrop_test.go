package redisq_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq"
)

// TestClusterReplyLostAfterRun: over a Redis Cluster, an Enqueue of a
// generated id whose connection drops after the server ran it, before
// its reply came, returns an error (outcome unknown) or enqueued once,
// on a cluster client of MaxRetries -1 and MaxRedirects -1, the
// configuration the package doc asks for. (With go-redis's default
// MaxRedirects, 3, the cluster client sends the FCALL again on a new
// connection: the Enqueue returned no error with two messages ready.)
func TestClusterReplyLostAfterRun(t *testing.T) {
	cc := startCluster(t)
	ctx := context.Background()
	var armed atomic.Bool
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cc.Options().Addrs, MaxRetries: -1, MaxRedirects: -1,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &dropConn{Conn: c, armed: &armed}, nil
		}})
	defer rdb.Close()
	q, err := redisq.Open(ctx, rdb, "cdrop", &redisq.Options{AckTimeout: time.Minute})
	require.NoError(t, err)
	defer q.Close()
	check, err := redisq.Open(ctx, cc, "cdrop", &redisq.Options{ReadOnly: true})
	require.NoError(t, err)
	defer check.Close()

	armed.Store(true)
	_, err = q.Enqueue(ctx, []byte("once"))
	require.False(t, armed.Load(), "no FCALL was dropped")
	s, serr := check.StatsContext(ctx)
	require.NoError(t, serr)
	if err == nil {
		require.Equal(t, int64(1), s.Ready, "an Enqueue that returned success enqueued more than once")
	}
	require.LessOrEqual(t, s.Ready, int64(1))
}
