package redisq_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestOpenChecksServer: Open refuses a server that cannot keep the
// durability asked for, and says what to change.
func TestOpenChecksServer(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "no", "--appendfsync", "everysec", "--maxmemory-policy", "noeviction")
	rdb := srv.Client()
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		config map[string]string
		opts   redisq.Options
		want   string // "" when Open must succeed
	}{
		{"no AOF, SyncAlways", nil, redisq.Options{}, "appendfsync always"},
		{"no AOF, SyncInterval", nil, redisq.Options{Sync: queue.SyncInterval}, "appendonly yes"},
		{"no AOF, SyncNever", nil, redisq.Options{Sync: queue.SyncNever}, ""},
		{"no AOF, trusted", nil, redisq.Options{TrustServer: true}, ""},
		{"everysec, SyncAlways", map[string]string{"appendonly": "yes"}, redisq.Options{}, "appendfsync always"},
		{"everysec, SyncInterval", nil, redisq.Options{Sync: queue.SyncInterval}, ""},
		{"always, SyncAlways", map[string]string{"appendfsync": "always"}, redisq.Options{}, ""},
		{"eviction", map[string]string{"maxmemory-policy": "allkeys-lru"}, redisq.Options{}, "maxmemory-policy noeviction"},
		{"eviction, SyncNever", nil, redisq.Options{Sync: queue.SyncNever}, "maxmemory-policy noeviction"},
		{"eviction, trusted", nil, redisq.Options{TrustServer: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.config {
				require.NoError(t, rdb.ConfigSet(ctx, k, v).Err())
			}
			q, err := redisq.Open(ctx, rdb, "check", &tc.opts)
			if tc.want == "" {
				require.NoError(t, err)
				require.NoError(t, q.Close())
				return
			}
			require.ErrorIs(t, err, queue.ErrInvalidOptions)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestOpenServerUnreadable: Open advises TrustServer only when the
// server refuses to show its configuration (a user not allowed CONFIG);
// a server it cannot reach fails Open with the connection's error,
// without that advice, which would not help.
func TestOpenServerUnreadable(t *testing.T) {
	ctx := context.Background()
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer down.Close()
	_, err := redisq.Open(ctx, down, "unreadable", nil)
	require.Error(t, err)
	require.NotErrorIs(t, err, queue.ErrInvalidOptions, "server down")
	require.NotContains(t, err.Error(), "TrustServer", "server down")
	require.ErrorContains(t, err, "appendonly", "server down: the error names what Open was reading")

	srv := redistest.Start(t)
	require.NoError(t, srv.Client().Do(ctx, "ACL", "SETUSER", "noconfig", "reset", "on", ">pw", "~*", "&*",
		"+@all", "-config").Err())
	denied := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, Username: "noconfig", Password: "pw"})
	defer denied.Close()
	_, err = redisq.Open(ctx, denied, "unreadable", nil)
	require.ErrorIs(t, err, queue.ErrInvalidOptions, "CONFIG refused")
	require.ErrorContains(t, err, "TrustServer", "CONFIG refused")
	q, err := redisq.Open(ctx, denied, "unreadable", &redisq.Options{TrustServer: true})
	require.NoError(t, err, "CONFIG refused, trusted")
	require.NoError(t, q.Close())
}

// TestOpenServerUnauthenticated: a client the server does not
// authenticate (a wrong password, none where one is required) fails Open
// with the server's error and no advice to set TrustServer, which would
// not help: every command after CONFIG GET is refused the same way.
func TestOpenServerUnauthenticated(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	admin := srv.Client()
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "u", "on", ">pw", "~*", "&*", "+@all").Err())
	wrong := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, Username: "u", Password: "bad"})
	defer wrong.Close()
	require.NoError(t, admin.ConfigSet(ctx, "requirepass", "sekret").Err())
	none := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer none.Close()
	for name, c := range map[string]*redis.Client{"wrong password": wrong, "no password": none} {
		_, err := redisq.Open(ctx, c, "unauthenticated", nil)
		require.True(t, redis.IsAuthError(err), "%s: %v", name, err)
		require.NotErrorIs(t, err, queue.ErrInvalidOptions, name)
		require.NotContains(t, err.Error(), "TrustServer", name)
		require.ErrorContains(t, err, "appendonly", "%s: the error names what Open was reading", name)
	}
}

// TestOpenServerBusy: a server busy running a script answers CONFIG GET
// with BUSY, which says nothing of CONFIG: Open fails with that reply,
// without advice to set TrustServer.
func TestOpenServerBusy(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	admin := srv.Client()
	require.NoError(t, admin.ConfigSet(ctx, "busy-reply-threshold", "50").Err())
	looper := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ReadTimeout: -1})
	defer looper.Close()
	looping := make(chan struct{})
	go func() { defer close(looping); _ = looper.Eval(ctx, "while true do end", nil).Err() }()
	defer func() { <-looping }()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer c.Close()
	defer func() { require.NoError(t, c.Do(ctx, "SCRIPT", "KILL").Err()) }()
	var err error
	for range 100 { // until the script has run past busy-reply-threshold
		if _, err = redisq.Open(ctx, c, "busy", nil); redis.HasErrorPrefix(err, "BUSY ") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.True(t, redis.HasErrorPrefix(err, "BUSY "), "%v", err)
	require.NotErrorIs(t, err, queue.ErrInvalidOptions)
	require.NotContains(t, err.Error(), "TrustServer")
}

// TestKillServer kills redis-server (SIGKILL) under traffic with
// appendfsync always, restarts it on its files, and checks that no
// enqueue and no ack that returned success was lost.
func TestKillServer(t *testing.T) {
	killUnderTraffic(t, redistest.Start(t), nil)
}

// TestKillServerAfterOperator: the same, the operator having rewritten
// the AOF (BGREWRITEAOF, which folds the history into a new base file
// while the writes go on) or reloaded the data set (DEBUG RELOAD, which
// saves an RDB snapshot and loads it back) mid-traffic: the restart
// from the AOF still holds every enqueue and ack that returned.
func TestKillServerAfterOperator(t *testing.T) {
	t.Run("BGREWRITEAOF", func(t *testing.T) {
		killUnderTraffic(t, redistest.Start(t), func(ctx context.Context, c *redis.Client) {
			require.NoError(t, c.BgRewriteAOF(ctx).Err())
			require.Eventually(t, func() bool {
				info, err := c.Info(ctx, "persistence").Result()
				return err == nil && strings.Contains(info, "aof_rewrite_in_progress:0") &&
					strings.Contains(info, "aof_rewrite_scheduled:0") && strings.Contains(info, "aof_rewrites:1")
			}, 5*time.Second, 10*time.Millisecond)
		})
	})
	t.Run("DEBUG RELOAD", func(t *testing.T) {
		srv := redistest.Start(t, append(redistest.Durable, "--enable-debug-command", "yes")...)
		killUnderTraffic(t, srv, func(ctx context.Context, c *redis.Client) {
			require.NoError(t, c.Do(ctx, "DEBUG", "RELOAD").Err())
		})
	})
}

// killUnderTraffic runs producers and consumers on srv, calls midway
// (when given) on its own client half way, kills srv (SIGKILL), restarts
// it on its files, and checks that no enqueue and no ack that returned
// success was lost.
func killUnderTraffic(t *testing.T, srv *redistest.Server, midway func(context.Context, *redis.Client)) {
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithCancel(context.Background())
	q, err := redisq.Open(ctx, rdb, "kill", &redisq.Options{AckTimeout: time.Minute, OpTimeout: time.Second})
	require.NoError(t, err)

	var (
		mu                     sync.Mutex
		enqueued, acked, tried = map[string]bool{}, map[string]bool{}, map[string]bool{}
		next                   atomic.Int64
		wg                     sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() { // producer: ids known before the call
			for ctx.Err() == nil {
				id := fmt.Sprint("k", next.Add(1))
				if _, err := q.Enqueue(ctx, []byte("payload"), queue.WithID(id)); err == nil {
					mu.Lock()
					enqueued[id] = true
					mu.Unlock()
				}
			}
		})
		wg.Go(func() { // consumer
			for ctx.Err() == nil {
				m, err := q.Dequeue(ctx)
				if err != nil {
					time.Sleep(time.Millisecond)
					continue
				}
				err = m.Ack()
				mu.Lock()
				tried[m.ID] = true
				if err == nil {
					acked[m.ID] = true
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(750 * time.Millisecond)
	if midway != nil {
		midway(context.Background(), srv.Client())
	}
	time.Sleep(750 * time.Millisecond)
	srv.Kill()
	time.Sleep(100 * time.Millisecond) // calls in flight fail
	cancel()
	wg.Wait()
	_ = q.Close()

	srv.Restart()
	later := &shiftedClock{d: time.Hour} // every lease of the dead server's clients has run out
	q2, err := redisq.Open(context.Background(), rdb, "kill", &redisq.Options{Clock: later, ManualRequeue: true})
	require.NoError(t, err)
	defer q2.Close()
	_, err = q2.RequeueExpired()
	require.NoError(t, err)
	left := map[string]bool{}
	for {
		m, err := q2.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		require.NoError(t, err)
		left[m.ID] = true
		require.NoError(t, m.Ack())
	}
	require.NotEmpty(t, enqueued)
	require.NotEmpty(t, acked)
	lost := 0
	for id := range enqueued {
		if !left[id] && !tried[id] {
			lost++
		}
	}
	undone := 0
	for id := range acked {
		if left[id] {
			undone++
		}
	}
	t.Logf("acknowledged: %d enqueues, %d acks; after the restart %d messages left", len(enqueued), len(acked), len(left))
	require.Zero(t, lost, "acknowledged enqueues lost")
	require.Zero(t, undone, "acknowledged acks undone")
}

// shiftedClock is the system clock moved by d.
type shiftedClock struct{ d time.Duration }

func (c *shiftedClock) Now() time.Time                         { return time.Now().Add(c.d) }
func (c *shiftedClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// TestReplicas: with Options.Replicas every change waits for the replica;
// without a replica to confirm it the call fails with ErrNotDurable,
// having made the change.
func TestReplicas(t *testing.T) {
	primary, replica := startPair(t)
	rdb := primary.Client()
	ctx := context.Background()
	q, err := redisq.Open(ctx, rdb, "replicas", &redisq.Options{Replicas: 1, WaitTimeout: 4 * time.Second})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("a"), queue.WithID("a"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.Ack())
	there, err := replica.Client().HExists(ctx, "walq:{replicas}:2:msg", "b"+strconv.FormatUint(m.Receipt.Seq, 10)).Result()
	require.NoError(t, err)
	require.False(t, there, "the replica has the ack")

	replica.Kill()
	short, err := redisq.Open(ctx, rdb, "replicas", &redisq.Options{Replicas: 1, WaitTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	defer short.Close()
	_, err = short.Enqueue(ctx, []byte("b"), queue.WithID("b"))
	require.ErrorIs(t, err, redisq.ErrNotDurable)
	_, err = q.Enqueue(ctx, []byte("b"), queue.WithID("b"))
	require.ErrorIs(t, err, queue.ErrDuplicate, "the change was made on the primary")
}
