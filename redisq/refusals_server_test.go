package redisq_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestRefusalsOneServer: the refusals a single server (no cluster)
// answers, READONLY from a primary demoted to a replica and LOADING while
// it reads its data, come before the function runs, and the handle rides
// through both: an Enqueue made meanwhile runs once, when the server
// takes writes again.
func TestRefusalsOneServer(t *testing.T) {
	ctx := context.Background()
	waitSent := func(t *testing.T, done chan error, why string) {
		t.Helper()
		time.Sleep(500 * time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("Enqueue returned while %s: %v", why, err)
		default:
		}
	}

	t.Run("Readonly", func(t *testing.T) {
		srv, other := redistest.Start(t), redistest.Start(t)
		rdb := srv.Client()
		var seen tally
		rdb.AddHook(refusalHook{t: &seen})
		q, err := redisq.Open(ctx, rdb, "ro", &redisq.Options{OpTimeout: time.Minute, AckTimeout: time.Minute})
		require.NoError(t, err)
		defer q.Close()
		// A switch-over: other copies srv (its data and the library),
		// takes over, and srv becomes its replica, so that srv refuses
		// the function itself (READONLY), not a missing library.
		linked := func(c *redis.Client) func() bool {
			return func() bool {
				info, err := c.Info(ctx, "replication").Result()
				return err == nil && strings.Contains(info, "master_link_status:up")
			}
		}
		oc := other.Client()
		host, port, _ := net.SplitHostPort(srv.Addr)
		require.NoError(t, oc.Do(ctx, "REPLICAOF", host, port).Err())
		require.Eventually(t, linked(oc), 30*time.Second, 20*time.Millisecond)
		require.NoError(t, oc.Do(ctx, "REPLICAOF", "NO", "ONE").Err())
		host, port, _ = net.SplitHostPort(other.Addr)
		require.NoError(t, rdb.Do(ctx, "REPLICAOF", host, port).Err())
		require.Eventually(t, linked(rdb), 30*time.Second, 20*time.Millisecond)
		done := make(chan error, 1)
		go func() { _, err := q.Enqueue(ctx, []byte("b"), queue.WithID("b")); done <- err }()
		waitSent(t, done, "the server was a replica")
		require.NoError(t, rdb.Do(ctx, "REPLICAOF", "NO", "ONE").Err())
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("Enqueue still waits after the server took writes again")
		}
		require.Contains(t, seen.String(), "fcall READONLY", "the replica refused the function")
		s, err := q.StatsContext(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(1), s.Ready, "the refused enqueue ran once")
	})

	t.Run("Loading", func(t *testing.T) {
		srv := redistest.Start(t, append([]string{"--enable-debug-command", "yes"}, redistest.Durable...)...)
		rdb, probe := srv.Client(), srv.Client()
		ctl := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ReadTimeout: time.Minute})
		defer ctl.Close()
		var seen tally
		rdb.AddHook(refusalHook{t: &seen})
		q, err := redisq.Open(ctx, rdb, "loading", &redisq.Options{OpTimeout: time.Minute, AckTimeout: time.Minute})
		require.NoError(t, err)
		defer q.Close()
		_, err = q.Enqueue(ctx, []byte("a"), queue.WithID("a"))
		require.NoError(t, err)
		pipe := ctl.Pipeline()
		for i := range 10000 {
			pipe.Set(ctx, fmt.Sprint("filler:", i), "v", 0)
		}
		_, err = pipe.Exec(ctx)
		require.NoError(t, err)
		// Loading 10000 keys at 150µs each takes 1.5s; the server
		// answers others between reads of 1KB.
		require.NoError(t, ctl.ConfigSet(ctx, "key-load-delay", "150").Err())
		require.NoError(t, ctl.ConfigSet(ctx, "loading-process-events-interval-bytes", "1024").Err())
		reloaded := make(chan error, 1)
		go func() { reloaded <- ctl.Do(context.Background(), "DEBUG", "RELOAD").Err() }()
		require.Eventually(t, func() bool {
			info, err := probe.Info(ctx, "persistence").Result()
			return err == nil && strings.Contains(info, "loading:1")
		}, 10*time.Second, 5*time.Millisecond, "the server loads")
		done := make(chan error, 1)
		go func() { _, err := q.Enqueue(ctx, []byte("b"), queue.WithID("b")); done <- err }()
		waitSent(t, done, "the server loaded its data")
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("Enqueue still waits after the server loaded its data")
		}
		require.NoError(t, <-reloaded)
		require.Contains(t, seen.String(), "fcall LOADING", "the loading server refused the function")
		s, err := q.StatsContext(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(2), s.Ready, "the refused enqueue ran once")
	})
}
