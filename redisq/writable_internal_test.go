package redisq

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestOpenOnReplica: a read-only replica, which holds the libraries by
// replication and runs the no-writes check of the ACL, is refused at
// Open and OpenSorted, saying so, rather than failing every write later.
func TestOpenOnReplica(t *testing.T) {
	master := redistest.Start(t)
	ctx := context.Background()
	q, err := Open(ctx, master.Client(), "rep", &Options{TrustServer: true})
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("x"))
	require.NoError(t, err)
	require.NoError(t, q.Close())
	s, err := OpenSorted[string](ctx, master.Client(), "srep", &SortedOptions{Options: Options{TrustServer: true}})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	host, port, _ := strings.Cut(master.Addr, ":")
	rc := redistest.Start(t, "--replicaof", host, port).Client()
	require.Eventually(t, func() bool { // a replica in sync: its master's keys, kind and libraries
		return rc.Get(ctx, "walq:{rep}:2:seq").Val() == "1" && rc.HGet(ctx, "walq:{srep}:s:stats", "kind").Val() != ""
	}, 10*time.Second, 20*time.Millisecond)
	_, err = Open(ctx, rc, "rep", &Options{TrustServer: true})
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
	require.ErrorContains(t, err, "replica")
	_, err = OpenSorted[string](ctx, rc, "srep", &SortedOptions{Options: Options{TrustServer: true}})
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
	require.ErrorContains(t, err, "replica")
}

// TestOpenPastMaxmemory: a master past maxmemory, which refuses enqueues
// but takes acks, is not taken for a replica: Open and OpenSorted of its
// queues succeed, so that consumers can drain them.
func TestOpenPastMaxmemory(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	q, err := Open(ctx, rdb, "full", &Options{TrustServer: true})
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("x"))
	require.NoError(t, err)
	require.NoError(t, q.Close())
	s, err := OpenSorted[string](ctx, rdb, "sfull", &SortedOptions{Options: Options{TrustServer: true}})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	for _, name := range []string{"sfull-single", "sfull-unrecorded"} {
		s, err = OpenSorted[string](ctx, rdb, name, &SortedOptions{SingleFlight: true, Options: Options{TrustServer: true}})
		require.NoError(t, err)
		require.NoError(t, s.Publish(ctx, "a", "k", nil))
		require.NoError(t, s.Close())
	}
	require.NoError(t, rdb.HDel(ctx, "walq:{sfull-unrecorded}:s:stats", "single").Err()) // as an earlier version left it
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "1").Err())
	_, err = rdb.Set(ctx, "other", "x", 0).Result()
	require.ErrorContains(t, err, "OOM")
	q, err = Open(ctx, rdb, "full", &Options{TrustServer: true})
	require.NoError(t, err)
	require.NoError(t, q.Close())
	s, err = OpenSorted[string](ctx, rdb, "sfull", &SortedOptions{Options: Options{TrustServer: true}})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	for _, name := range []string{"sfull-single", "sfull-unrecorded"} {
		s, err = OpenSorted[string](ctx, rdb, name, &SortedOptions{SingleFlight: true, Options: Options{TrustServer: true}})
		require.NoError(t, err, "%s: a single-flight handle opens to drain its queue", name)
		require.NoError(t, s.Close())
	}
	_, err = OpenSorted[string](ctx, rdb, "sfull-single", &SortedOptions{Options: Options{TrustServer: true}})
	require.ErrorIs(t, err, queue.ErrInvalidOptions, "the SingleFlight recorded before")
}

// TestOpenOnReplicaWithoutLibrary: a replica whose master never loaded
// this version's libraries (a fresh master, or one upgraded) refuses the
// load itself; Open says the server is a replica all the same.
func TestOpenOnReplicaWithoutLibrary(t *testing.T) {
	master := redistest.Start(t)
	ctx := context.Background()
	host, port, _ := strings.Cut(master.Addr, ":")
	rc := redistest.Start(t, "--replicaof", host, port).Client()
	require.Eventually(t, func() bool {
		return strings.Contains(rc.Info(ctx, "replication").Val(), "master_link_status:up")
	}, 10*time.Second, 20*time.Millisecond)
	_, err := Open(ctx, rc, "rep", &Options{TrustServer: true})
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
	require.ErrorContains(t, err, "replica")
	_, err = OpenSorted[string](ctx, rc, "srep", &SortedOptions{Options: Options{TrustServer: true}})
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
	require.ErrorContains(t, err, "replica")
}

// TestOpenWhileMasterLacksReplicas: a master that refuses writes for a
// while (min-replicas-to-write unmet) is a master: Open succeeds, as a
// service must start while a replica restarts, and the calls report the
// refusal until it clears.
func TestOpenWhileMasterLacksReplicas(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	opts := &Options{TrustServer: true}
	q, err := Open(ctx, rdb, "norep", opts) // loads the libraries: a server refusing writes cannot
	require.NoError(t, err)
	require.NoError(t, q.Close())
	s, err := OpenSorted[string](ctx, rdb, "snorep", &SortedOptions{Options: *opts})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, rdb.ConfigSet(ctx, "min-replicas-to-write", "1").Err())
	q, err = Open(ctx, rdb, "norep", opts)
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("x"))
	require.ErrorContains(t, err, "NOREPLICAS")
	require.NoError(t, q.Close())
	s, err = OpenSorted[string](ctx, rdb, "snorep", &SortedOptions{Options: *opts})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s, err = OpenSorted[string](ctx, rdb, "snorep", &SortedOptions{SingleFlight: true, Options: *opts})
	require.NoError(t, err, "a single-flight handle the master cannot record yet")
	require.NoError(t, s.Close())
}

// TestOpenOnReplicaNotRidden: a replica's READONLY is no failover to
// wait out at Open: the load of the library and the check that the
// server takes writes are each sent once, and Open says the server is a
// replica, not after OpTimeout of sends again.
func TestOpenOnReplicaNotRidden(t *testing.T) {
	master := redistest.Start(t)
	ctx := context.Background()
	host, port, _ := strings.Cut(master.Addr, ":")
	rc := redistest.Start(t, "--replicaof", host, port).Client()
	require.Eventually(t, func() bool {
		return strings.Contains(rc.Info(ctx, "replication").Val(), "master_link_status:up")
	}, 10*time.Second, 20*time.Millisecond)
	sends := &sendLog{pick: func(c redis.Cmder) bool {
		args := fmt.Sprint(c.Args())
		return strings.HasPrefix(args, "[function load") || strings.Contains(args, "_writable ")
	}}
	rc.AddHook(sends)
	_, err := Open(ctx, rc, "rep", &Options{TrustServer: true}) // the replica lacks the library: its load is refused
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
	require.ErrorContains(t, err, "read-only replica")
	require.Equal(t, 1, len(sends.take()), "the refused load is sent once")
	q, err := Open(ctx, master.Client(), "rep", &Options{TrustServer: true})
	require.NoError(t, err)
	require.NoError(t, q.Close())
	require.Eventually(t, func() bool {
		return len(rc.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: library.name}).Val()) == 1
	}, 10*time.Second, 20*time.Millisecond)
	sends.take()
	_, err = Open(ctx, rc, "rep", &Options{TrustServer: true}) // it holds the library: the writable check is refused
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
	require.ErrorContains(t, err, "read-only replica")
	require.Equal(t, 1, len(sends.take()), "the refused check is sent once")
}
