package redisq_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// movesCluster is a cluster of three primaries, each with one replica,
// and a client of every node.
type movesCluster struct {
	cc      *redis.ClusterClient // MaxRetries -1, MaxRedirects -1
	nodes   []*redis.Client      // one per node, MaxRetries -1
	servers []*redistest.Server  // the nodes' processes, in the order of nodes
}

// startReplicatedCluster starts six redis-server nodes with cluster mode
// on and joins them with redis-cli --cluster create --cluster-replicas 1:
// three primaries splitting the slots, each with a replica.
func startReplicatedCluster(t *testing.T) *movesCluster {
	t.Helper()
	return startReplicatedClusterTimeout(t, 3000)
}

// startReplicatedClusterTimeout is startReplicatedCluster with the
// nodes' cluster-node-timeout in milliseconds: how long a primary may
// be unreachable before its replica takes over.
func startReplicatedClusterTimeout(t *testing.T, nodeTimeoutMs int) *movesCluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatal("redis-cli is not on PATH; it comes with redis-server (redis-tools)")
	}
	args := append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", fmt.Sprint(nodeTimeoutMs), "--repl-diskless-sync-delay", "0"}, redistest.Durable...)
	var addrs []string
	var servers []*redistest.Server
	for range 6 {
		srv := redistest.Start(t, args...)
		servers = append(servers, srv)
		addrs = append(addrs, srv.Addr)
	}
	out, err := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...),
		"--cluster-replicas", "1", "--cluster-yes")...).CombinedOutput()
	require.NoError(t, err, "redis-cli --cluster create: %s", out)
	mc := &movesCluster{servers: servers}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		mc.nodes = append(mc.nodes, c)
	}
	mc.waitOK(t)
	mc.cc = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1, MaxRedirects: -1})
	t.Cleanup(func() { _ = mc.cc.Close() })
	return mc
}

// waitOK waits until every node reports cluster_state:ok and every
// replica's link to its primary is up.
func (mc *movesCluster) waitOK(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, c := range mc.nodes {
		require.Eventually(t, func() bool {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
			repl, err := c.Info(ctx, "replication").Result()
			return err == nil && (strings.Contains(repl, "role:master") || strings.Contains(repl, "master_link_status:up"))
		}, time.Minute, 50*time.Millisecond, "node %s settles", c.Options().Addr)
	}
}

// node returns the client of the node at addr.
func (mc *movesCluster) node(t *testing.T, addr string) *redis.Client {
	t.Helper()
	for _, c := range mc.nodes {
		if c.Options().Addr == addr {
			return c
		}
	}
	t.Fatalf("no node at %s", addr)
	return nil
}

// owner returns the address of the primary that owns slot, as the node
// c sees it, from CLUSTER SHARDS, and fails t when none does. Inside an
// EventuallyWithT, t is the tick's CollectT: a view caught between two
// gossip messages of a failover (the slot's shard listed without a
// primary yet) or a reply late on a loaded machine fails that tick
// alone, and the wait looks again (waitOwner).
func (mc *movesCluster) owner(t require.TestingT, c *redis.Client, slot int) string {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	shards, err := c.ClusterShards(context.Background()).Result()
	require.NoError(t, err, "CLUSTER SHARDS on %s", c.Options().Addr)
	for _, s := range shards {
		for _, r := range s.Slots {
			if int(r.Start) <= slot && slot <= int(r.End) {
				for _, n := range s.Nodes {
					if n.Role == "master" {
						return net.JoinHostPort(n.IP, fmt.Sprint(n.Port))
					}
				}
			}
		}
	}
	require.Failf(t, "no primary owns the slot", "no primary owns slot %d as %s sees it", slot, c.Options().Addr)
	return ""
}

// waitOwner waits until the node c sees the primary at want own slot.
func (mc *movesCluster) waitOwner(t *testing.T, c *redis.Client, slot int, want string, within time.Duration) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.Equal(ct, want, mc.owner(ct, c, slot))
	}, within, 20*time.Millisecond, "node %s sees %s own slot %d", c.Options().Addr, want, slot)
}

// replicaOf returns the client of the replica of the primary at addr.
func (mc *movesCluster) replicaOf(t *testing.T, addr string) *redis.Client {
	t.Helper()
	ctx := context.Background()
	host, port, _ := net.SplitHostPort(addr)
	for _, c := range mc.nodes {
		role, err := c.Do(ctx, "ROLE").Slice()
		require.NoError(t, err)
		if role[0] == "slave" && fmt.Sprint(role[1]) == host && fmt.Sprint(role[2]) == port {
			return c
		}
	}
	t.Fatalf("no replica of %s", addr)
	return nil
}

// failover makes the replica of the primary at addr take over its slots
// (CLUSTER FAILOVER, the coordinated failover: the primary stops taking
// writes until the replica has all of them) and waits until every node
// sees it as the owner of slot. A coordinated failover gives up silently
// when the replica has not caught up within 5s, as on a loaded machine:
// it is asked again until the replica is a primary.
func (mc *movesCluster) failover(t *testing.T, addr string, slot int) string {
	t.Helper()
	ctx := context.Background()
	r := mc.replicaOf(t, addr)
	promoted := func() bool {
		role, err := r.Do(ctx, "ROLE").Slice()
		return err == nil && role[0] == "master"
	}
	for try := 0; !promoted(); try++ {
		require.Less(t, try, 6, "the replica of %s is not promoted", addr)
		require.NoError(t, r.Do(ctx, "CLUSTER", "FAILOVER").Err())
		for end := time.Now().Add(10 * time.Second); !promoted() && time.Now().Before(end); {
			time.Sleep(20 * time.Millisecond)
		}
	}
	to := r.Options().Addr
	for _, c := range mc.nodes {
		mc.waitOwner(t, c, slot, to, time.Minute)
	}
	mc.waitOK(t)
	return to
}

// migrate moves slot from the primary at from to the primary at to as
// redis-cli --cluster reshard does: SETSLOT IMPORTING on the target,
// MIGRATING on the source, MIGRATE of the slot's keys until none is
// left, then SETSLOT NODE on both and on every other primary. pause is
// how long the slot stays in migration before its keys move and after.
func (mc *movesCluster) migrate(t *testing.T, slot int, from, to string, pause time.Duration) {
	t.Helper()
	ctx := context.Background()
	src, dst := mc.node(t, from), mc.node(t, to)
	srcID, err := src.Do(ctx, "CLUSTER", "MYID").Text()
	require.NoError(t, err)
	dstID, err := dst.Do(ctx, "CLUSTER", "MYID").Text()
	require.NoError(t, err)
	require.NoError(t, dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err())
	require.NoError(t, src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err())
	time.Sleep(pause)
	host, port, _ := net.SplitHostPort(to)
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		require.NoError(t, err)
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		require.NoError(t, src.Do(ctx, args...).Err())
	}
	time.Sleep(pause)
	require.NoError(t, dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	require.NoError(t, src.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	for _, c := range mc.nodes {
		if c != src && c != dst {
			_ = c.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err() // a replica refuses it; gossip tells it
		}
	}
	for _, c := range mc.nodes {
		mc.waitOwner(t, c, slot, to, time.Minute)
	}
}

// otherPrimary returns the address of a primary other than addr.
func (mc *movesCluster) otherPrimary(t *testing.T, addr string) string {
	t.Helper()
	for _, c := range mc.nodes {
		role, err := c.Do(context.Background(), "ROLE").Slice()
		require.NoError(t, err)
		if role[0] == "master" && c.Options().Addr != addr {
			return c.Options().Addr
		}
	}
	t.Fatalf("no primary but %s", addr)
	return ""
}

// produce starts two producers of numbered messages (ids m1, m2, …,
// enqueued WithID, 2 ms apart) that run until stop; each id whose
// Enqueue returned nil goes into enqueued under mu, each error to fail.
// wg counts the producers.
func produce(ctx context.Context, q *redisq.Queue, stop *atomic.Bool, wg *sync.WaitGroup, mu *sync.Mutex,
	enqueued map[string]bool, fail func(what string, err error)) {
	var next atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				id := fmt.Sprint("m", next.Add(1))
				if _, err := q.Enqueue(ctx, []byte(id), queue.WithID(id)); err != nil {
					fail("enqueue", err)
					continue
				}
				mu.Lock()
				enqueued[id] = true
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
}

// tally counts outcomes by kind, for the test's report.
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (t *tally) add(what string, err error) {
	kind := "other"
	for _, w := range []string{"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "LOADING"} {
		if strings.Contains(err.Error(), w+" ") {
			kind = w
			break
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == nil {
		t.n = map[string]int{}
	}
	if kind == "other" && t.n[what+" other"] == 0 {
		fmt.Printf("first other error of %s: %v\n", what, err)
	}
	t.n[what+" "+kind]++
}

// refusalHook counts the cluster client's commands that the server
// refused without running them.
type refusalHook struct {
	redistest.Hook
	t *tally
}

func (h refusalHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		var re redis.Error
		if errors.As(err, &re) && err != redis.Nil {
			h.t.add(cmd.Name(), err)
		}
		return err
	}
}

func (t *tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ks []string
	for k, v := range t.n {
		ks = append(ks, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(ks)
	return strings.Join(ks, " ")
}

// TestClusterMoves runs producers and blocked consumers of one queue
// over a cluster of three primaries with replicas while the queue's slot
// moves twice: the replica of its primary takes over (CLUSTER FAILOVER),
// then the slot migrates to another primary (SETSLOT IMPORTING and
// MIGRATING, MIGRATE of its keys, SETSLOT NODE). Every call returns
// without an error (each refusal the servers answered in between, MOVED,
// ASK, TRYAGAIN, CLUSTERDOWN, proves the call did not run, and the
// handle sends it again), every message is acked exactly once, in one
// delivery, and a consumer blocked after the moves wakes for a new
// message.
func TestClusterMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of six nodes")
	}
	mc := startReplicatedCluster(t)
	ctx := context.Background()
	const name = "moves"
	key := "walq:{" + name + "}:seq"
	slot, err := mc.nodes[0].ClusterKeySlot(ctx, key).Result()
	require.NoError(t, err)
	var refusals tally // what the servers answered, by kind
	mc.cc.AddHook(refusalHook{t: &refusals})
	q, err := redisq.Open(ctx, mc.cc, name, &redisq.Options{AckTimeout: time.Minute})
	require.NoError(t, err)
	defer q.Close()

	var (
		errs     tally
		stop     atomic.Bool
		mu       sync.Mutex
		enqueued = map[string]bool{}
		acked    = map[string]int{}
		again    []string // delivered more than once
		wg       sync.WaitGroup
	)
	produce(ctx, q, &stop, &wg, &mu, enqueued, errs.add)
	done := make(chan struct{})
	var cwg sync.WaitGroup
	for range 3 { // consumers, blocked while the queue is empty
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for {
				dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				m, err := q.Dequeue(dctx)
				cancel()
				select {
				case <-done:
					if m != nil {
						_ = m.Ack()
					}
					return
				default:
				}
				if err != nil {
					if dctx.Err() == nil {
						errs.add("dequeue", err)
					}
					continue
				}
				if err := m.Ack(); err != nil {
					errs.add("ack", err)
					continue
				}
				mu.Lock()
				acked[m.ID]++
				if m.Deliveries != 1 {
					again = append(again, m.ID)
				}
				mu.Unlock()
			}
		}()
	}

	time.Sleep(time.Second)
	primary := mc.owner(t, mc.nodes[0], int(slot))
	promoted := mc.failover(t, primary, int(slot))
	t.Logf("failover: slot %d from %s to %s", slot, primary, promoted)
	time.Sleep(time.Second)
	target := mc.otherPrimary(t, promoted)
	mc.migrate(t, int(slot), promoted, target, 300*time.Millisecond)
	t.Logf("migration: slot %d from %s to %s", slot, promoted, target)
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()
	drained := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= len(enqueued)
	}
	for end := time.Now().Add(15 * time.Second); !drained() && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	close(done)
	cwg.Wait()

	fmt.Printf("TestClusterMoves: %d enqueued, %d acked; errors: %s; refusals sent again: %s\n",
		len(enqueued), len(acked), errs.String(), refusals.String())
	require.Empty(t, errs.String(), "no call failed while the slot moved")
	require.NotEmpty(t, refusals.String(), "the servers refused calls while the slot moved")
	require.Empty(t, again, "delivered more than once")
	for id := range enqueued {
		require.Equal(t, 1, acked[id], "message %s acked once", id)
	}
	require.Equal(t, len(enqueued), len(acked), "every acked message was enqueued")
	require.Greater(t, len(enqueued), 100, "traffic ran")
	s, err := q.StatsContext(ctx)
	require.NoError(t, err)
	require.Zero(t, s.Ready+s.InFlight+s.Delayed+s.Dead, "nothing left")

	// A consumer blocked after the moves wakes for a message enqueued
	// then: the wake-up's PUBLISH on the new owner reaches the handle's
	// subscription.
	got := make(chan *queue.Message, 1)
	go func() {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		m, err := q.Dequeue(dctx)
		if err != nil {
			t.Error(err)
		}
		got <- m
	}()
	time.Sleep(300 * time.Millisecond)
	_, err = q.Enqueue(ctx, []byte("last"), queue.WithID("last"))
	require.NoError(t, err)
	select {
	case m := <-got:
		require.NotNil(t, m)
		require.Equal(t, "last", m.ID)
		require.NoError(t, m.Ack())
	case <-time.After(5 * time.Second):
		t.Fatal("a Dequeue blocked after the moves did not wake for a new message")
	}
}

// TestClusterMoveWait holds a queue's slot in migration (SETSLOT
// MIGRATING on its owner, so that every call of the queue is refused
// with TRYAGAIN or ASK) and checks how the handle's wait to send again
// ends: a call whose context ends returns the context's error at once,
// a Dequeue's included; a call without a context returns the refusal
// after OpTimeout; Close ends the wait with queue.ErrClosed; and a call
// waiting when the migration is called off (SETSLOT STABLE) runs, once.
// The refused calls left the queue as it was.
func TestClusterMoveWait(t *testing.T) {
	cc := startCluster(t)
	ctx := context.Background()
	const name = "movewait"
	open := func(opTimeout time.Duration) *redisq.Queue {
		q, err := redisq.Open(ctx, cc, name, &redisq.Options{OpTimeout: opTimeout, AckTimeout: time.Minute})
		require.NoError(t, err)
		t.Cleanup(func() { _ = q.Close() })
		return q
	}
	opTimeout := time.Second
	q, closing, patient, waiting := open(opTimeout), open(time.Minute), open(time.Minute), open(time.Minute)
	_, err := q.Enqueue(ctx, []byte("first"), queue.WithID("first"))
	require.NoError(t, err)

	key := "walq:{" + name + "}:seq"
	owner, err := cc.MasterForKey(ctx, key)
	require.NoError(t, err)
	slot, err := owner.ClusterKeySlot(ctx, key).Result()
	require.NoError(t, err)
	// ForEachMaster calls the function on every primary at once: the
	// other primaries' ids are gathered under a lock, and one is picked.
	var (
		idMu   sync.Mutex
		others []string
	)
	err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		if c.Options().Addr == owner.Options().Addr {
			return nil
		}
		id, err := c.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return err
		}
		idMu.Lock()
		defer idMu.Unlock()
		others = append(others, id)
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, others)
	sort.Strings(others)
	other := others[0]
	require.NoError(t, owner.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", other).Err())
	refusedCall := func(err error) bool {
		return err != nil && (strings.Contains(err.Error(), "TRYAGAIN ") || strings.Contains(err.Error(), "ASK "))
	}

	// The calls run on a handle whose OpTimeout is far longer than their
	// context (waiting), so that only the context ends their wait, and
	// the context is long enough for the first refusal's round trip on a
	// loaded machine: the error must then name a refusal, whenever in the
	// ride the context ends.
	t.Run("ContextEnds", func(t *testing.T) {
		const wait = 2 * time.Second
		for _, c := range []struct {
			name string
			call func(ctx context.Context) error
		}{
			{"Enqueue", func(ctx context.Context) error {
				_, err := waiting.Enqueue(ctx, []byte("x"), queue.WithID("x"))
				return err
			}},
			{"Dequeue", func(ctx context.Context) error { _, err := waiting.Dequeue(ctx); return err }},
			{"StatsContext", func(ctx context.Context) error { _, err := waiting.StatsContext(ctx); return err }},
		} {
			t.Run(c.name, func(t *testing.T) {
				start := time.Now() // before the deadline is set: took is at least wait
				cctx, cancel := context.WithTimeout(ctx, wait)
				defer cancel()
				err := c.call(cctx)
				took := time.Since(start)
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.True(t, refusedCall(err), "the error names the refusal: %v", err)
				require.GreaterOrEqual(t, took, wait, "it waited for the slot until its context ended")
				require.Less(t, took, wait+rideSlack, "returns when its context ends")
			})
		}
	})
	t.Run("OpTimeout", func(t *testing.T) {
		start := time.Now()
		_, err := q.TryDequeue() // takes no context: bounded by OpTimeout
		took := time.Since(start)
		require.True(t, refusedCall(err), "the last refusal: %v", err)
		require.GreaterOrEqual(t, took, opTimeout/2, "it waited for the slot")
		require.Less(t, took, opTimeout+rideSlack)
	})
	t.Run("Close", func(t *testing.T) {
		done := make(chan error, 1)
		go func() { _, err := closing.Enqueue(ctx, []byte("y"), queue.WithID("y")); done <- err }()
		time.Sleep(300 * time.Millisecond)
		start := time.Now()
		require.NoError(t, closing.Close())
		select {
		case err := <-done:
			require.ErrorIs(t, err, queue.ErrClosed)
			require.Less(t, time.Since(start), rideSlack, "the wait ends at Close")
		case <-time.After(5 * time.Second):
			t.Fatal("Enqueue waited on after Close")
		}
	})
	t.Run("RunsOnceAfter", func(t *testing.T) {
		done := make(chan error, 1)
		go func() { _, err := patient.Enqueue(ctx, []byte("late"), queue.WithID("late")); done <- err }()
		time.Sleep(500 * time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("Enqueue returned while the slot migrated: %v", err)
		default:
		}
		require.NoError(t, owner.Do(ctx, "CLUSTER", "SETSLOT", slot, "STABLE").Err())
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("Enqueue still waits after the migration was called off")
		}
	})
	require.NoError(t, owner.Do(ctx, "CLUSTER", "SETSLOT", slot, "STABLE").Err())
	t.Run("ClusterDown", func(t *testing.T) {
		// The owner gives the slot up: it answers CLUSTERDOWN (the
		// cluster no longer covers every slot) until it takes it back.
		var seen tally
		cc.AddHook(refusalHook{t: &seen})
		require.NoError(t, owner.Do(ctx, "CLUSTER", "DELSLOTS", slot).Err())
		done := make(chan error, 1)
		go func() { _, err := patient.Enqueue(ctx, []byte("down"), queue.WithID("down")); done <- err }()
		time.Sleep(500 * time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("Enqueue returned while the slot was not served: %v", err)
		default:
		}
		require.NoError(t, owner.Do(ctx, "CLUSTER", "ADDSLOTS", slot).Err())
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("Enqueue still waits after the slot is served again")
		}
		require.Contains(t, seen.String(), "CLUSTERDOWN", "the server answered CLUSTERDOWN")
		fmt.Printf("TestClusterMoveWait/ClusterDown: refusals sent again: %s\n", seen.String())
	})
	s, err := q.StatsContext(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), s.Ready, "the enqueues that waited ran once; the refused ones not at all")
	for _, id := range []string{"first", "late", "down"} {
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.Equal(t, id, m.ID)
		require.Equal(t, 1, m.Deliveries)
		require.NoError(t, m.Ack())
	}
}

// rideSlack is what a call may take beyond the end of its wait: its last
// send and a loaded machine's scheduling.
const rideSlack = 700 * time.Millisecond
