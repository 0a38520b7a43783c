package redisq_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestLibraryLost: a handle whose server lost the function library (a
// restart without persistence, a replica or new master that never had
// it) loads it again at the next call and carries on.
func TestLibraryLost(t *testing.T) {
	ctx := context.Background()
	t.Run("restart without persistence", func(t *testing.T) {
		srv := redistest.Start(t, "--appendonly", "no", "--save", "")
		q, err := redisq.Open(ctx, srv.Client(), "lost", &redisq.Options{TrustServer: true})
		require.NoError(t, err)
		defer q.Close()
		_, err = q.Enqueue(ctx, []byte("before"))
		require.NoError(t, err)
		srv.Kill()
		srv.Restart() // empty, its commandstats zero
		roundTrip(t, q)
		requireLoaded(t, srv.Client())
	})
	t.Run("flushed, with replicas", func(t *testing.T) {
		primary, _ := startPair(t)
		q, err := redisq.Open(ctx, patientClient(t, primary), "lost", &redisq.Options{Replicas: 1, WaitTimeout: patientWait})
		require.NoError(t, err)
		defer q.Close()
		require.NoError(t, primary.Client().ConfigResetStat(ctx).Err())
		require.NoError(t, primary.Client().FunctionFlush(ctx).Err())
		roundTrip(t, q)
		requireLoaded(t, primary.Client())
	})
	t.Run("sorted queue, flushed", func(t *testing.T) {
		srv := redistest.Start(t)
		c := srv.Client()
		s, err := redisq.OpenSorted[int64](ctx, c, "lost", &redisq.SortedOptions{Options: redisq.Options{TrustServer: true}})
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, c.ConfigResetStat(ctx).Err())
		require.NoError(t, c.FunctionFlush(ctx).Err())
		require.NoError(t, s.Publish(ctx, 1, "k", []byte("v")))
		bs, err := s.Pull(ctx, 10)
		require.NoError(t, err)
		require.Len(t, bs, 1)
		require.NoError(t, bs[0].Ack())
		requireLoaded(t, c)
	})
}

// requireLoaded checks that the server was sent the library since its
// commandstats were last zeroed (by the handle's call or its housekeeper,
// whichever met the missing library first).
func requireLoaded(t *testing.T, c *redis.Client) {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	require.Contains(t, info, "cmdstat_function|load:calls=", "the library was loaded again")
}

// roundTrip enqueues, dequeues and acks one message through q.
func roundTrip(t *testing.T, q *redisq.Queue) {
	t.Helper()
	ctx := context.Background()
	_, err := q.Enqueue(ctx, []byte("after"), queue.WithID("after"))
	require.NoError(t, err)
	for {
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.Ack())
		if m.ID == "after" {
			break
		}
	}
	st, err := q.StatsContext(ctx)
	require.NoError(t, err)
	require.Zero(t, st.Ready+st.InFlight)
}

// TestLibraryPerVersion: the server keeps one library per version of the
// code, named by its digest; a queue runs its own version's, whatever
// other version is loaded beside it.
func TestLibraryPerVersion(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	q, err := redisq.Open(ctx, c, "versions", &redisq.Options{TrustServer: true})
	require.NoError(t, err)
	defer q.Close()
	libs, err := c.FunctionList(ctx, redis.FunctionListQuery{}).Result()
	require.NoError(t, err)
	require.Len(t, libs, 1)
	name := libs[0].Name
	require.True(t, strings.HasPrefix(name, "walq_"), name)
	// Another version: same operations under its own name, every one an error.
	other := "#!lua name=walq_0000000000000000\n"
	for _, op := range []string{"enqueue", "dequeue", "settle", "housekeep", "dead", "inspect"} {
		other += "redis.register_function('walq_0000000000000000_" + op + "', function() return redis.error_reply('OLD') end)\n"
	}
	require.NoError(t, c.FunctionLoad(ctx, other).Err())
	roundTrip(t, q)
	q2, err := redisq.Open(ctx, c, "versions", &redisq.Options{TrustServer: true})
	require.NoError(t, err)
	defer q2.Close()
	roundTrip(t, q2)
	libs, err = c.FunctionList(ctx, redis.FunctionListQuery{}).Result()
	require.NoError(t, err)
	require.Len(t, libs, 2, "Open loads nothing when its version is there")
}
