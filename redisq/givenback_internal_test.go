package redisq

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq/internal/redistest"
)

// refusal is an error reply of the server's that refused a call
// without running it (refused).
type refusal string

func (r refusal) Error() string { return string(r) }
func (refusal) RedisError()     {}

// leaseGate holds the FCALLs of the lease1 function until a test lets
// them through, or their caller's context ends, and refuses the first give-back
// (the settle function's op "release") with READONLY, as a primary
// demoted between the lease and the give-back would.
type leaseGate struct {
	redistest.Hook
	held chan struct{} // a lease1 call is held: one send per call held
	open chan struct{} // closed to let the held calls through

	mu       sync.Mutex
	refused  int // give-backs refused
	releases int // give-backs sent on to the server
}

// gatedQueue opens the queue name with three messages, MaxDeliveries 1,
// and a leaseGate hooked into its client; o reopens it.
func gatedQueue(t *testing.T, name string) (srv *redistest.Server, q *Queue, g *leaseGate, o *Options) {
	t.Helper()
	srv = redistest.Start(t)
	rdb := srv.Client()
	o = &Options{OpTimeout: 10 * time.Second, AckTimeout: time.Minute, MaxDeliveries: 1}
	q, err := Open(context.Background(), rdb, name, o)
	require.NoError(t, err)
	enqueueNumbered(t, q, 3)
	g = newLeaseGate()
	rdb.AddHook(g)
	return srv, q, g, o
}

func newLeaseGate() *leaseGate {
	return &leaseGate{held: make(chan struct{}, 8), open: make(chan struct{})}
}

func (g *leaseGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		fn, args, ok := fcallFunc(cmd)
		if !ok {
			return next(ctx, cmd)
		}
		switch {
		case strings.HasSuffix(fn, "_lease1"):
			g.held <- struct{}{}
			// A lease call runs on past its caller's context, which it
			// carries (leaseContext): the held call of a lone Dequeue
			// fails as that caller leaves.
			caller, _ := ctx.Value(callerKey{}).(context.Context)
			if caller == nil {
				caller = ctx
			}
			select {
			case <-g.open:
			case <-caller.Done():
				cmd.SetErr(caller.Err())
				return caller.Err()
			}
		case isCall(fn, args, "settle", "release"):
			g.mu.Lock()
			first := g.refused == 0
			if first {
				g.refused++
			} else {
				g.releases++
			}
			g.mu.Unlock()
			if first {
				err := refusal("READONLY You can't write against a read only replica.")
				cmd.SetErr(err)
				return err
			}
		}
		return next(ctx, cmd)
	}
}

// TestGiveBackRidesRefusalAfterClose: the give-back of a grouped call
// that Close waits for rides a refusal of the server's (READONLY) as
// it would on an open handle, within OpTimeout, instead of ending at
// Close's start: else its leases, taken for callers that left, run out
// and each counts a delivery no consumer got, which with MaxDeliveries 1
// dead-letters a message never seen. The grouped call is held while its
// callers leave and Close begins (closeDuringGroupedCall); then it
// leases two messages, and their give-back is refused once.
func TestGiveBackRidesRefusalAfterClose(t *testing.T) {
	ctx := context.Background()
	srv, q, g, o := gatedQueue(t, "rideback")

	closeDuringGroupedCall(t, q, g)
	g.mu.Lock()
	require.Equal(t, 1, g.refused, "the give-back was refused once")
	require.Equal(t, 1, g.releases, "and then sent again, though Close had begun")
	g.mu.Unlock()

	q2, err := Open(ctx, srv.Client(), "rideback", o)
	require.NoError(t, err)
	defer q2.Close()
	s, err := q2.StatsContext(ctx)
	require.NoError(t, err)
	require.Zero(t, s.InFlight, "leased for callers that left, not given back: %+v", s)
	require.Zero(t, s.Delivered, "deliveries counted, though no consumer got one: %+v", s)
	require.Equal(t, int64(3), s.Ready, "%+v", s)
	for range 3 {
		m, err := q2.TryDequeue()
		require.NoError(t, err)
		require.Equal(t, 1, m.Deliveries, "message %s", m.ID)
		require.NoError(t, m.Ack())
	}
}

// TestGroupedCallBuriesAfterClose: a grouped call that Close waits for
// and that leased an undecodable body buries it (dead-letters it as a
// corrupt record), as it would on an open handle; before, that
// dead-lettering failed with queue.ErrClosed, and the body stayed
// leased until its lease ran out, when with MaxDeliveries 1 the expiry
// dead-lettered it as a message delivered too often, hiding the damage.
func TestGroupedCallBuriesAfterClose(t *testing.T) {
	ctx := context.Background()
	srv, q, g, o := gatedQueue(t, "buryclose")
	require.NoError(t, srv.Client().HSet(ctx, q.keys[1], "b1", "\xc1").Err()) // the first message's body

	closeDuringGroupedCall(t, q, g)
	q2, err := Open(ctx, srv.Client(), "buryclose", o)
	require.NoError(t, err)
	defer q2.Close()
	s, err := q2.StatsContext(ctx)
	require.NoError(t, err)
	require.Zero(t, s.InFlight, "left leased after Close: %+v", s)
	require.Equal(t, int64(1), s.Dead, "%+v", s)
	dead, err := q2.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Contains(t, dead[0].Reason, corruptReason)
}

// closeDuringGroupedCall makes a grouped Dequeues' call (two callers)
// that g holds until both callers left and Close began, then lets it
// through and returns once Close returned. Dequeue a's lone call is
// held until a leaves; b and c, queued behind it meanwhile, go in one
// call.
func closeDuringGroupedCall(t *testing.T, q *Queue, g *leaseGate) {
	t.Helper()
	ctx := context.Background()
	dequeue := func(dctx context.Context) <-chan error {
		out := make(chan error, 1)
		go func() {
			m, err := q.Dequeue(dctx)
			if err == nil {
				err = fmt.Errorf("got message %s", m.ID)
			}
			out <- err
		}()
		return out
	}
	actx, aleave := context.WithCancel(ctx)
	a := dequeue(actx)
	<-g.held // a's lone call
	bctx, bleave := context.WithCancel(ctx)
	b, c := dequeue(bctx), dequeue(bctx)
	require.Eventually(t, func() bool {
		q.leases.mu.Lock()
		defer q.leases.mu.Unlock()
		return len(q.leases.pending) == 2
	}, 10*time.Second, time.Millisecond, "b and c queued behind a")
	aleave()
	require.ErrorIs(t, <-a, context.Canceled)
	<-g.held // b and c's call
	bleave()
	require.ErrorIs(t, <-b, context.Canceled)
	require.ErrorIs(t, <-c, context.Canceled)

	closed := make(chan error, 1)
	go func() { closed <- q.Close() }()
	require.Eventually(t, q.isClosed, 10*time.Second, time.Millisecond, "Close began")
	close(g.open)
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(2 * q.o.OpTimeout):
		t.Fatal("Close still waits, twice OpTimeout on")
	}
}

// TestCloseWaitsForGroupedCallOfEndlessCaller: a grouped Dequeues' call
// whose runner's context never ends (context.Background, whose Done is
// nil) runs in that caller's goroutine, not in one of its own; Close
// waits for it all the same, and for its give-back of what it leased for
// the callers that left, so nothing is sent after Close returned.
//
// Dequeue x's lone call is held until x leaves; r (context.Background)
// and b queue behind it meanwhile and go in one call, which r runs and
// which is held in turn while b leaves and Close begins.
func TestCloseWaitsForGroupedCallOfEndlessCaller(t *testing.T) {
	ctx := context.Background()
	srv, q, g, o := gatedQueue(t, "endless")
	queued := func(n int) {
		t.Helper()
		require.Eventually(t, func() bool {
			q.leases.mu.Lock()
			defer q.leases.mu.Unlock()
			return len(q.leases.pending) == n
		}, 10*time.Second, time.Millisecond, "%d Dequeues queued", n)
	}

	xctx, xleave := context.WithCancel(ctx)
	x := make(chan error, 1)
	go func() { _, err := q.Dequeue(xctx); x <- err }()
	<-g.held // x's lone call
	r := make(chan error, 1)
	go func() {
		m, err := q.Dequeue(ctx)
		if err == nil && m.Deliveries != 1 {
			err = fmt.Errorf("r's message %s: delivery %d", m.ID, m.Deliveries)
		}
		r <- err
	}()
	queued(1)
	bctx, bleave := context.WithCancel(ctx)
	b := make(chan error, 1)
	go func() { _, err := q.Dequeue(bctx); b <- err }()
	queued(2)
	xleave()
	require.ErrorIs(t, <-x, context.Canceled)
	<-g.held // r and b's call, run by r
	bleave()
	require.ErrorIs(t, <-b, context.Canceled)

	closed := make(chan error, 1)
	go func() { closed <- q.Close() }()
	require.Eventually(t, q.isClosed, 10*time.Second, time.Millisecond, "Close began")
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a grouped call it must wait for was held", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(g.open)
	require.NoError(t, <-closed)
	g.mu.Lock()
	require.Equal(t, 1, g.releases, "b's lease given back before Close returned")
	g.mu.Unlock()
	require.NoError(t, <-r)

	q2, err := Open(ctx, srv.Client(), "endless", o)
	require.NoError(t, err)
	defer q2.Close()
	s, err := q2.StatsContext(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), s.InFlight, "r's message alone: %+v", s)
	require.Equal(t, uint64(1), s.Delivered, "r's delivery alone: %+v", s)
	require.Equal(t, int64(2), s.Ready, "%+v", s)
}
