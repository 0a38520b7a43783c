package redisq

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// mixTest is a queue on a server of its own whose FCALLs are recorded,
// by their operation (the function's name after its last '_').
type mixTest struct {
	q   *Queue
	rdb *redis.Client
	mu  sync.Mutex
	ops []string // guarded by mu
}

func newMixTest(t *testing.T, name string, o *Options) *mixTest {
	t.Helper()
	srv := redistest.Start(t)
	m := &mixTest{rdb: srv.Client()}
	m.rdb.AddHook(&fcallFaults{seen: func(fn string, _ []any, _ error) {
		op := fn[strings.LastIndex(fn, "_")+1:]
		if op == "housekeep" { // the housekeeper's, at any time
			return
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.ops = append(m.ops, op)
	}})
	q, err := Open(context.Background(), m.rdb, name, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	m.q = q
	return m
}

// run runs reqs as the coalescer runs a batch of them and returns their
// errors and the operations of the FCALLs it made.
func (m *mixTest) run(reqs []callReq) ([]error, []string) {
	m.mu.Lock()
	m.ops = nil
	m.mu.Unlock()
	errs := m.q.runCalls(reqs)
	m.mu.Lock()
	defer m.mu.Unlock()
	return errs, m.ops
}

func (m *mixTest) enqueueReq(t *testing.T, it queue.Item) callReq {
	t.Helper()
	now := m.q.o.Clock.Now()
	args, err := m.q.itemArgs(now, &it)
	require.NoError(t, err)
	return callReq{enq: &enqueueReq{ctx: context.Background(), now: now, args: args}}
}

func leaseCall() (callReq, *leaseReq) {
	r := &leaseReq{ctx: context.Background()}
	return callReq{lease: r}, r
}

func ackCall(r queue.Receipt) callReq { return callReq{ack: &r} }

// TestMixedCallEachOutcome: Acks, Enqueues and lone Dequeues of one
// handle waiting together go to the server in one call, which runs the
// acks, then the enqueues, then the leases, and gives each caller its own
// outcome: a stale receipt fails with ErrLeaseLost alone, a Dequeue
// leases the message enqueued in the same call, and one that finds none
// gets none, without an error.
func TestMixedCallEachOutcome(t *testing.T) {
	m := newMixTest(t, "mixed", &Options{AckTimeout: time.Minute, TrustServer: true})
	ctx := context.Background()
	for _, p := range []string{"a", "b"} {
		_, err := m.q.Enqueue(ctx, []byte(p))
		require.NoError(t, err)
	}
	ma, err := m.q.TryDequeue()
	require.NoError(t, err)
	mb, err := m.q.TryDequeue()
	require.NoError(t, err)
	stale := mb.Receipt
	stale.Lease++

	l1, r1 := leaseCall()
	l2, r2 := leaseCall()
	reqs := []callReq{l1, ackCall(ma.Receipt), m.enqueueReq(t, queue.Item{Payload: []byte("c")}), ackCall(stale), l2}
	errs, ops := m.run(reqs)
	require.Equal(t, []string{"mix"}, ops, "one call for all")
	require.NoError(t, errs[0])
	require.NotNil(t, r1.m, "the first Dequeue leases the message enqueued in the call")
	require.Equal(t, "c", string(r1.m.Payload))
	require.NoError(t, errs[1], "the live receipt's ack")
	require.NoError(t, errs[2], "the enqueue")
	require.ErrorIs(t, errs[3], queue.ErrLeaseLost, "the stale receipt's ack")
	require.NoError(t, errs[4])
	require.Nil(t, r2.m, "nothing left for the second Dequeue")

	require.ErrorIs(t, ma.Ack(), queue.ErrLeaseLost, "acked by the mixed call")
	require.NoError(t, mb.Ack(), "the stale ack left the live delivery alone")
	require.NoError(t, r1.m.Ack())
	st := m.q.Stats()
	require.Zero(t, st.Ready+st.InFlight)
}

// TestMixedCallOnePartFails: a part of a mixed call that fails (here the
// enqueues, on a sequence counter overwritten with a hash) fails its own
// callers only, with an error naming the key, and leaves the queue as it
// was; the acks and leases of the same call are done.
func TestMixedCallOnePartFails(t *testing.T) {
	m := newMixTest(t, "mixfail", &Options{AckTimeout: time.Minute, TrustServer: true})
	ctx := context.Background()
	for _, p := range []string{"a", "b"} {
		_, err := m.q.Enqueue(ctx, []byte(p))
		require.NoError(t, err)
	}
	ma, err := m.q.TryDequeue()
	require.NoError(t, err)
	seq := m.q.keys[0]
	saved, err := m.rdb.Get(ctx, seq).Result()
	require.NoError(t, err)
	require.NoError(t, m.rdb.Del(ctx, seq).Err())
	require.NoError(t, m.rdb.HSet(ctx, seq, "x", "y").Err())

	l, r := leaseCall()
	reqs := []callReq{m.enqueueReq(t, queue.Item{Payload: []byte("c")}), ackCall(ma.Receipt), l}
	errs, ops := m.run(reqs)
	require.Equal(t, []string{"mix"}, ops)
	require.ErrorContains(t, errs[0], "WRONGTYPE")
	require.ErrorContains(t, errs[0], seq, "the error names the key")
	require.NoError(t, errs[1], "the ack of the same call")
	require.NoError(t, errs[2], "the lease of the same call")
	require.NotNil(t, r.m)
	require.Equal(t, "b", string(r.m.Payload))

	require.NoError(t, m.rdb.Del(ctx, seq).Err())
	require.NoError(t, m.rdb.Set(ctx, seq, saved, 0).Err())
	require.NoError(t, r.m.Ack())
	_, err = m.q.TryDequeue()
	require.ErrorIs(t, err, queue.ErrEmpty, "the failed enqueue left nothing behind")
	_, err = m.q.Enqueue(ctx, []byte("d"))
	require.NoError(t, err)
	md, err := m.q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "d", string(md.Payload))
}

// TestMixedCallHandsOn: in a mixed call, acks that name a message its
// producer named go on to settle, and a Dequeue that meets a message at
// its MaxDeliveries goes on to dequeue, which kills it, as after their
// own lean calls; an Enqueue with a producer's id runs in a call of its
// own, first; each caller gets its own outcome.
func TestMixedCallHandsOn(t *testing.T) {
	m := newMixTest(t, "mixon", &Options{AckTimeout: time.Minute, TrustServer: true, MaxDeliveries: 1, ManualRequeue: true})
	ctx := context.Background()
	_, err := m.q.Enqueue(ctx, []byte("p"), queue.WithID("p1"))
	require.NoError(t, err)
	_, err = m.q.Enqueue(ctx, []byte("q"))
	require.NoError(t, err)
	mp, err := m.q.TryDequeue()
	require.NoError(t, err)
	mq, err := m.q.TryDequeue()
	require.NoError(t, err)
	unlimited, err := Open(ctx, m.rdb, "mixon", &Options{AckTimeout: time.Minute, TrustServer: true, MaxDeliveries: -1, ManualRequeue: true})
	require.NoError(t, err)
	defer unlimited.Close()
	_, err = m.q.Enqueue(ctx, []byte("r"))
	require.NoError(t, err)
	mr, err := unlimited.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, mr.Nack(0)) // ready again, delivered once: at m.q's limit

	l, r := leaseCall()
	reqs := []callReq{ackCall(mp.Receipt), m.enqueueReq(t, queue.Item{Payload: []byte("s"), ID: "p2"}),
		ackCall(mq.Receipt), l, m.enqueueReq(t, queue.Item{Payload: []byte("t")})}
	errs, ops := m.run(reqs)
	require.Equal(t, []string{"enqueue", "mix", "settle", "dequeue"}, ops)
	for i, err := range errs {
		require.NoError(t, err, "call %d", i)
	}
	require.NotNil(t, r.m)
	require.Equal(t, "s", string(r.m.Payload), "the producer's message, enqueued first, is leased")
	dead, err := m.q.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "r", string(dead[0].Payload))
	_, err = m.q.Enqueue(ctx, []byte("again"), queue.WithID("p1"))
	require.NoError(t, err, "the acked producer's id is free")
}
