package redisq_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// refuseWrites makes the server a replica of a primary that is not
// there: it refuses every write (READONLY), keeping its data, until the
// returned func makes it a primary again.
func refuseWrites(t *testing.T, rdb *redis.Client) func() {
	t.Helper()
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	require.NoError(t, rdb.Do(ctx, "REPLICAOF", "127.0.0.1", strconv.Itoa(port)).Err())
	return func() { require.NoError(t, rdb.Do(ctx, "REPLICAOF", "NO", "ONE").Err()) }
}

// TestGroupedCallerLeaves: an Enqueue or a lone Dequeue sent together
// with another of its kind, the server refusing their call (READONLY),
// returns within its own context's deadline, not when the call gives up
// (OpTimeout) or is let through; the other caller of the group succeeds
// once the server takes writes again, and the one that left is in no
// later send: its message is not enqueued, no message is leased for it.
//
// A lone call rides first until its context ends (1s), while the two
// queue behind it; then those two ride together (until OpTimeout, 3s),
// the leaving caller's deadline comes 0.6s later, between two sends, and
// the server takes writes again 0.3s after that.
func TestGroupedCallerLeaves(t *testing.T) {
	const opTimeout = 3 * time.Second
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, q *redisq.Queue)
		call  func(ctx context.Context, q *redisq.Queue, id string) error
		check func(t *testing.T, s queue.Stats)
	}{
		{
			name:  "Enqueue",
			setup: func(*testing.T, *redisq.Queue) {},
			call: func(ctx context.Context, q *redisq.Queue, id string) error {
				_, err := q.Enqueue(ctx, []byte(id), queue.WithID(id))
				return err
			},
			check: func(t *testing.T, s queue.Stats) {
				require.Equal(t, int64(1), s.Ready, "only the caller that stayed enqueued")
			},
		},
		{
			name: "Dequeue",
			setup: func(t *testing.T, q *redisq.Queue) {
				for i := range 3 {
					_, err := q.Enqueue(context.Background(), []byte("m"), queue.WithID(fmt.Sprint("m", i)))
					require.NoError(t, err)
				}
			},
			call: func(ctx context.Context, q *redisq.Queue, _ string) error {
				_, err := q.Dequeue(ctx)
				return err
			},
			check: func(t *testing.T, s queue.Stats) {
				require.Equal(t, int64(1), s.InFlight, "only the caller that stayed leased")
				require.Equal(t, int64(2), s.Ready)
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			srv := redistest.Start(t)
			rdb := srv.Client()
			q, err := redisq.Open(ctx, rdb, "groupleave", &redisq.Options{OpTimeout: opTimeout, AckTimeout: time.Minute})
			require.NoError(t, err)
			defer q.Close()
			c.setup(t, q)
			allow := refuseWrites(t, rdb)
			defer rdb.Do(ctx, "REPLICAOF", "NO", "ONE")

			start := time.Now()
			actx, acancel := context.WithDeadline(ctx, start.Add(time.Second))
			defer acancel()
			ahead := make(chan error, 1)
			go func() { ahead <- c.call(actx, q, "a") }()
			time.Sleep(100 * time.Millisecond)
			stays := make(chan error, 1)
			go func() { stays <- c.call(ctx, q, "b") }()
			deadline := start.Add(1615 * time.Millisecond) // while b and c ride together, between sends
			lctx, cancel := context.WithDeadline(ctx, deadline)
			defer cancel()
			left := make(chan error, 1)
			var leftAt time.Time
			go func() { err := c.call(lctx, q, "c"); leftAt = time.Now(); left <- err }()

			require.ErrorIs(t, <-ahead, context.DeadlineExceeded, "the lone call ahead rides until its context ends")
			time.Sleep(time.Until(deadline.Add(300 * time.Millisecond)))
			select {
			case err := <-left:
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.NotErrorIs(t, err, redisq.ErrMayHaveRun, "it left while the server refused its call")
				require.Less(t, leftAt.Sub(deadline), 100*time.Millisecond, "returns within its deadline")
			default:
				t.Fatalf("the grouped caller still waits %v past its deadline", time.Since(deadline))
			}
			allow()
			select {
			case err := <-stays:
				require.NoError(t, err, "the caller that stayed in the group")
			case <-time.After(time.Second):
				t.Fatal("the caller that stayed still waits after the server took writes again")
			}
			s, err := q.StatsContext(ctx)
			require.NoError(t, err)
			c.check(t, s)
		})
	}
}

// TestGroupedDequeueLeftAckedOnce: lone Dequeues with short contexts,
// sent together while CLIENT PAUSE WRITE holds their calls, leave when
// their contexts end; a message the held call leased for a caller that
// left is given back, not kept leased until its lease (a minute) runs
// out: every message is acked exactly once, soon.
func TestGroupedDequeueLeftAckedOnce(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	q, err := redisq.Open(ctx, rdb, "groupleaveack",
		&redisq.Options{AckTimeout: time.Minute, MaxDeliveries: 1000})
	require.NoError(t, err)
	defer q.Close()
	const n = 300
	enqueueNumbered(t, q, n)
	holdWrites(t, srv)
	acked := leavingConsumers(t, q, n)
	require.Equal(t, n, len(acked), "every message acked within 30s, well before a lease of a minute runs out")
	for id, ds := range acked {
		require.Len(t, ds, 1, "message %s acked %d times", id, len(ds))
	}
	s, err := q.StatsContext(ctx)
	require.NoError(t, err)
	require.Zero(t, s.Ready+s.InFlight+s.Dead)
}

// TestGroupedEnqueueLeavesInFlight: an Enqueue sent together with
// another, whose call the server holds (CLIENT PAUSE WRITE), returns at
// once when its context ends, with ErrMayHaveRun and its id, not with
// its context's error alone: the held call runs once the pause ends, and
// its message is in the queue.
func TestGroupedEnqueueLeavesInFlight(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	q, err := redisq.Open(ctx, rdb, "groupinflight", &redisq.Options{OpTimeout: 5 * time.Second, AckTimeout: time.Minute})
	require.NoError(t, err)
	defer q.Close()
	allow := refuseWrites(t, rdb)
	defer rdb.Do(ctx, "REPLICAOF", "NO", "ONE")
	// A lone Enqueue rides the refusals until its context ends, while b
	// and c queue behind it; they go together, into the pause.
	start := time.Now()
	actx, acancel := context.WithDeadline(ctx, start.Add(500*time.Millisecond))
	defer acancel()
	ahead := make(chan error, 1)
	go func() { _, err := q.Enqueue(actx, []byte("a"), queue.WithID("a")); ahead <- err }()
	time.Sleep(100 * time.Millisecond)
	stays := make(chan error, 1)
	go func() { _, err := q.Enqueue(ctx, []byte("b"), queue.WithID("b")); stays <- err }()
	deadline := start.Add(900 * time.Millisecond)
	cctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	type result struct {
		id  string
		err error
		at  time.Time
	}
	left := make(chan result, 1)
	go func() {
		id, err := q.Enqueue(cctx, []byte("c"), queue.WithID("c"))
		left <- result{id, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, srv.Client().Do(ctx, "CLIENT", "PAUSE", 2000, "WRITE").Err())
	allow()
	require.ErrorIs(t, <-ahead, context.DeadlineExceeded)
	r := <-left
	require.ErrorIs(t, r.err, redisq.ErrMayHaveRun, "its call was held by the server")
	require.ErrorIs(t, r.err, context.DeadlineExceeded)
	require.Equal(t, "c", r.id, "the id comes with ErrMayHaveRun")
	require.Less(t, r.at.Sub(deadline), 100*time.Millisecond, "returns within its deadline")
	require.NoError(t, <-stays, "the caller that stayed, once the pause ended")
	s, err := q.StatsContext(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), s.Ready, "the held call ran, with c's message")
}

// TestLoneEnqueueLeavesInFlight: an Enqueue alone, which the server runs
// but whose reply comes late (a proxy drops it), and whose client stops
// waiting for it once the Enqueue's context ended (a client that ends
// the wait at the context's deadline, ContextTimeoutEnabled; or the
// client's ReadTimeout after a cancel; or a client that would send it
// again itself, AcceptDoubleRuns, and whose wait before that send ends
// with the context), returns ErrMayHaveRun and its id, as one sent
// together with others does, not its context's error alone: its message
// is in the queue.
func TestLoneEnqueueLeavesInFlight(t *testing.T) {
	for _, id := range []string{"", "given"} { // enqueue1 (a generated id), and enqueue
		leavesInFlight(t, "id="+id, func(ctx context.Context, q *redisq.Queue) ([]string, error) {
			var opts []queue.EnqueueOption
			if id != "" {
				opts = append(opts, queue.WithID(id))
			}
			got, err := q.Enqueue(ctx, []byte("ran"), opts...)
			if id != "" && got != "" {
				require.Equal(t, id, got)
			}
			return []string{got}, err
		})
	}
}

// TestEnqueueBatchLeavesInFlight: the same for an EnqueueBatch, one call
// too: it returns ErrMayHaveRun with every id, not its context's error
// and no id, and its messages are in the queue.
func TestEnqueueBatchLeavesInFlight(t *testing.T) {
	batches := map[string][]queue.Item{
		"generated ids": {{Payload: []byte("a")}, {Payload: []byte("b")}}, // enqueue1
		"a given id":    {{Payload: []byte("a")}, {ID: "given", Payload: []byte("b")}},
	}
	for name, items := range batches {
		leavesInFlight(t, name, func(ctx context.Context, q *redisq.Queue) ([]string, error) {
			return q.EnqueueBatch(ctx, items)
		})
	}
}

// leavesInFlight runs enqueue, one call to the server, through a proxy
// that drops the server's replies, with its context ended (at its
// deadline, with ContextTimeoutEnabled; cancelled, with a short
// ReadTimeout; cancelled, on a client that sends again itself), and
// checks that it returned ErrMayHaveRun and the id of every message,
// each in the queue.
func leavesInFlight(t *testing.T, name string, enqueue func(context.Context, *redisq.Queue) ([]string, error)) {
	cases := []struct {
		name string
		opt  redis.Options
		end  error
	}{
		{"deadline, ContextTimeoutEnabled", redis.Options{ContextTimeoutEnabled: true}, context.DeadlineExceeded},
		{"cancel, ReadTimeout", redis.Options{ReadTimeout: 300 * time.Millisecond}, context.Canceled},
		// A client that sends again itself (Options.AcceptDoubleRuns)
		// returns its context's error alone: its wait before the next
		// send ended with the context.
		{"cancel, ReadTimeout, client retries", redis.Options{ReadTimeout: 300 * time.Millisecond, MaxRetries: 2},
			context.Canceled},
	}
	for _, c := range cases {
		t.Run(c.name+", "+name, func(t *testing.T) { leaveInFlight(t, c.opt, c.end, enqueue) })
	}
}

func leaveInFlight(t *testing.T, opt redis.Options, end error, enqueue func(context.Context, *redisq.Queue) ([]string, error)) {
	ctx := context.Background()
	srv := redistest.Start(t)
	p := startDarkProxy(t, srv.Addr)
	resends := opt.MaxRetries > 0
	opt.Addr = p.addr()
	if !resends {
		opt.MaxRetries = -1
	}
	rdb := redis.NewClient(&opt)
	defer rdb.Close()
	q, err := redisq.Open(ctx, rdb, "loneinflight", &redisq.Options{ManualRequeue: true, AcceptDoubleRuns: resends})
	require.NoError(t, err)
	defer q.Close()
	// A connection of the pool made and greeted (HELLO), for the call to
	// draw, and the housekeeper's first pass done: the server's reply is
	// all the proxy drops.
	_, err = q.Enqueue(ctx, []byte("before"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.Ack())
	time.Sleep(200 * time.Millisecond)
	p.muted.Store(true)
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if end == context.Canceled {
		time.AfterFunc(100*time.Millisecond, cancel)
	}
	ids, err := enqueue(cctx, q)
	p.muted.Store(false)
	t.Logf("returned %q: %v", ids, err)
	require.ErrorIs(t, err, redisq.ErrMayHaveRun, "the server ran its call")
	require.ErrorIs(t, err, end)
	require.NotEmpty(t, ids, "the ids come with ErrMayHaveRun")
	for _, id := range ids {
		require.NotEmpty(t, id, "the ids come with ErrMayHaveRun")
	}
	for _, id := range ids {
		m, err = q.TryDequeue()
		require.NoError(t, err, "the message is in the queue")
		require.Equal(t, id, m.ID)
	}
}
