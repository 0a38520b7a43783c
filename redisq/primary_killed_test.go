package redisq_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq"
)

// TestClusterPrimaryKilled: under traffic, the primary of the queue's
// slot is killed (kill -9; appendfsync always) and the cluster promotes
// its replica (cluster-node-timeout 500ms). A call meanwhile meets the
// dead address (a dial error: nothing was sent) or the cluster's
// refusals, and is sent again until the client learns the new primary:
// no call returns a dial error. A call in flight when the primary died
// has an unknown outcome (its error is returned). With Replicas: 1 no
// enqueue that returned nil is lost and no message whose Ack returned
// nil is delivered again (the replica had both, WAIT); without, both
// may happen within the replication lag, which the test counts. (After
// the failover the new primary has no replica, so with Replicas every
// change returns ErrNotDurable, after WaitTimeout, until one joins.)
func TestClusterPrimaryKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of six nodes")
	}
	for _, replicas := range []int{1, 0} {
		t.Run(fmt.Sprintf("Replicas%d", replicas), func(t *testing.T) { primaryKilled(t, replicas) })
	}
}

func primaryKilled(t *testing.T, replicas int) {
	mc := startReplicatedClusterTimeout(t, 500)
	ctx := context.Background()
	const name = "killed"
	key := "walq:{" + name + "}:seq"
	slot, err := mc.nodes[0].ClusterKeySlot(ctx, key).Result()
	require.NoError(t, err)
	q, err := redisq.Open(ctx, mc.cc, name, &redisq.Options{AckTimeout: 2 * time.Second,
		OpTimeout: 10 * time.Second, MaxDeliveries: 1000, Replicas: replicas, WaitTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	defer q.Close()

	var (
		errs     tally
		dials    atomic.Int64 // dial errors returned to a caller
		stop     atomic.Bool
		mu       sync.Mutex
		enqueued = map[string]bool{} // Enqueue returned nil
		got      = map[string]bool{} // delivered
		ackedOK  = map[string]bool{} // Ack returned nil
		again    []string            // delivered after an Ack of it returned nil
		wg       sync.WaitGroup
	)
	note := func(what string, err error) {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			dials.Add(1)
		}
		errs.add(what, err)
	}
	produce(ctx, q, &stop, &wg, &mu, enqueued, note)
	done := make(chan struct{})
	var cwg sync.WaitGroup
	for range 3 { // consumers
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				dctx, cancel := context.WithTimeout(ctx, time.Second)
				m, err := q.Dequeue(dctx)
				cancel()
				if err != nil {
					if dctx.Err() == nil {
						note("dequeue", err)
					}
					continue
				}
				mu.Lock()
				if ackedOK[m.ID] {
					again = append(again, m.ID)
				}
				got[m.ID] = true
				mu.Unlock()
				if err := m.Ack(); err != nil {
					note("ack", err)
					continue
				}
				mu.Lock()
				ackedOK[m.ID] = true
				mu.Unlock()
			}
		}()
	}

	// Traffic runs before the kill: waited for, not timed (a loaded
	// machine may run a few calls a second).
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(enqueued) >= 20 && len(ackedOK) >= 10
	}, time.Minute, 10*time.Millisecond, "traffic runs before the kill")
	primary := mc.owner(t, mc.nodes[0], int(slot))
	replica := mc.replicaOf(t, primary).Options().Addr
	for i, c := range mc.nodes {
		if c.Options().Addr == primary {
			mc.servers[i].Kill()
		}
	}
	start := time.Now()
	mc.waitOwner(t, mc.node(t, replica), int(slot), replica, 30*time.Second) // the replica takes over
	t.Logf("killed %s; %s took over slot %d after %v", primary, replica, slot, time.Since(start))
	time.Sleep(2 * time.Second)
	stop.Store(true)
	wg.Wait()
	var lost []string
	missing := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for id := range enqueued {
			if !got[id] {
				out = append(out, id)
			}
		}
		return out
	}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if lost = missing(); len(lost) == 0 {
			break
		}
	}
	close(done)
	cwg.Wait()

	st, serr := q.StatsContext(ctx)
	t.Logf("stats after the drain: %+v (err %v)", st, serr)
	mu.Lock()
	defer mu.Unlock()
	fmt.Printf("TestClusterPrimaryKilled/Replicas%d: %d enqueued, %d delivered, %d acked, %d lost, %d acked then delivered again; errors: %s\n",
		replicas, len(enqueued), len(got), len(ackedOK), len(lost), len(again), errs.String())
	require.Zero(t, dials.Load(), "no call returned a dial error: %s", errs.String())
	if replicas > 0 {
		require.Empty(t, lost, "an enqueue the replica confirmed is delivered")
		require.Empty(t, again, "an ack the replica confirmed holds")
	}
}
