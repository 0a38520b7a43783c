package queue_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// An EnqueueAsync blocked because the MaxPending window is full (its one
// record in flight, its write held) returns when its context ends, with
// the context's error, and appends nothing. A Close while one is blocked
// completes: the blocked call then returns ErrClosed, or was appended
// first and its Pending completes, as the call in flight does. A reopen
// holds exactly the messages whose calls completed without error.
func TestEnqueueAsyncWindowWaitEnds(t *testing.T) {
	for _, end := range []string{"context", "close"} {
		t.Run(end, func(t *testing.T) {
			g := newWriteGate(nil)
			dir := t.TempDir()
			q := open(t, dir, &queue.Options{FS: g, ManualRequeue: true, MaxPending: 1})
			g.arm()
			p, err := q.EnqueueAsync(context.Background(), []byte("first"))
			require.NoError(t, err)
			<-g.held // the window is full until its write is made
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type outcome struct {
				p   *queue.Pending
				err error
			}
			blocked := make(chan outcome, 1)
			go func() {
				p, err := q.EnqueueAsync(ctx, []byte("second"))
				blocked <- outcome{p, err}
			}()
			want := []string{"first"}
			if end == "context" {
				cancel()
				o := <-blocked
				require.ErrorIs(t, o.err, context.Canceled)
				require.Nil(t, o.p)
				close(g.freed)
				require.NoError(t, p.Wait(context.Background()))
				require.NoError(t, q.Flush(context.Background()))
				require.NoError(t, q.Close())
			} else {
				closed := make(chan error, 1)
				go func() { closed <- q.Close() }()
				close(g.freed) // Close's own record waits behind the held write
				o := <-blocked
				require.NoError(t, <-closed)
				require.NoError(t, p.Wait(context.Background()))
				if o.err == nil {
					require.NoError(t, o.p.Wait(context.Background()), "appended before the Close")
					want = append(want, "second")
				} else {
					require.ErrorIs(t, o.err, queue.ErrClosed)
				}
			}

			q = open(t, dir, nil)
			defer q.Close()
			for _, w := range want {
				require.Equal(t, w, string(tryDequeue(t, q).Payload))
			}
			requireEmpty(t, q)
		})
	}
}

// A SettleAsync blocked on a full MaxPending window judges its receipts
// when it gets its turn, not when it was called: a lease that ran out
// meanwhile is refused (ErrLeaseLost), and the message is delivered
// again, as a slow consumer's ack must not settle a message that another
// consumer may hold by then.
func TestSettleAsyncLeaseRunsOutInWindow(t *testing.T) {
	clk := newFakeClock()
	g := newWriteGate(nil)
	q := open(t, t.TempDir(), &queue.Options{FS: g, Clock: clk, AckTimeout: time.Minute, ManualRequeue: true, MaxPending: 1})
	defer q.Close()
	enqueue(t, q, "m")
	m := tryDequeue(t, q)
	g.arm()
	p, err := q.EnqueueAsync(context.Background(), []byte("x"))
	require.NoError(t, err)
	<-g.held // the window is full until its write is made
	acked := make(chan error, 1)
	go func() {
		_, err := q.AckAsync(m.Receipt)
		acked <- err
	}()
	clk.Advance(2 * time.Minute) // the lease runs out while the ack waits
	close(g.freed)
	require.ErrorIs(t, <-acked, queue.ErrLeaseLost)
	require.NoError(t, p.Wait(context.Background()))
	n, err := q.RequeueExpired()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	again := tryDequeue(t, q)
	require.Equal(t, "m", string(again.Payload))
	require.Equal(t, 2, again.Deliveries)
}

// A SettleAsync blocked because the MaxPending window is full (an
// EnqueueAsync in flight, its write held) has no context, and needs none:
// it returns once the window's oldest commit completes, which a poisoned
// log and Close both bring about. When the held write fails, it returns
// the error that poisoned the log and applies nothing; when Close runs,
// it returns ErrClosed, or was applied first and its Pending completes.
func TestSettleAsyncWindowWaitEnds(t *testing.T) {
	for _, end := range []string{"poisoned", "close"} {
		t.Run(end, func(t *testing.T) {
			var g *writeGate
			if end == "poisoned" {
				g = newWriteGate(errGateWrite)
			} else {
				g = newWriteGate(nil)
			}
			dir := t.TempDir()
			q := open(t, dir, &queue.Options{FS: g, ManualRequeue: true, MaxPending: 1})
			enqueue(t, q, "m")
			m := tryDequeue(t, q)
			g.arm()
			p, err := q.EnqueueAsync(context.Background(), []byte("x"))
			require.NoError(t, err)
			<-g.held // the window is full until its write is made
			type outcome struct {
				p   *queue.Pending
				err error
			}
			blocked := make(chan outcome, 1)
			go func() {
				p, err := q.SettleAsync(queue.Settlement{Receipt: m.Receipt, Op: queue.SettleAck})
				blocked <- outcome{p, err}
			}()
			waitInStack(t, "queue.(*Queue).reserveLocked") // it waits for the window
			closed := make(chan error, 1)
			if end == "close" {
				go func() { closed <- q.Close() }()
			}
			close(g.freed)
			var o outcome
			select {
			case o = <-blocked:
			case <-time.After(30 * time.Second): // a bound on a hang, not a speed
				t.Fatal("SettleAsync still waits for the window")
			}
			if end == "poisoned" {
				require.ErrorIs(t, o.err, errGateWrite)
				require.Nil(t, o.p)
				require.EqualValues(t, 1, q.Stats().InFlight, "the ack was applied")
				require.ErrorIs(t, p.Wait(context.Background()), errGateWrite)
				require.ErrorIs(t, q.Close(), errGateWrite)
			} else {
				require.NoError(t, <-closed)
				require.NoError(t, p.Wait(context.Background()))
				if o.err == nil {
					require.NoError(t, o.p.Wait(context.Background()), "applied before the Close")
				} else {
					require.ErrorIs(t, o.err, queue.ErrClosed)
				}
			}
		})
	}
}

// waitInStack returns once a goroutine's stack holds fn: a call is
// blocked in it.
func waitInStack(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn) {
			return
		}
	}
	t.Fatalf("no goroutine is in %s", fn)
}

// The MaxPending window is 4096 records by default, as the README says:
// with the first call's write held, 4096 EnqueueAsync calls return at
// once and the next one waits for room.
func TestMaxPendingDefault(t *testing.T) {
	g := newWriteGate(nil)
	q := open(t, t.TempDir(), &queue.Options{FS: g, ManualRequeue: true})
	defer q.Close()
	g.arm()
	ctx := context.Background()
	var ps []*queue.Pending
	p, err := q.EnqueueAsync(ctx, []byte("0"))
	require.NoError(t, err)
	ps = append(ps, p)
	<-g.held // nothing completes until this write is made
	var free sync.Once
	release := func() { free.Do(func() { close(g.freed) }) }
	defer release() // before Close, which waits for the write, on a failure
	for i := 1; i < 4096; i++ {
		wctx := newWaitedCtx()
		var cancel context.CancelFunc // bounds a wait that would hang the test
		wctx.Context, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		p, err := q.EnqueueAsync(wctx, []byte("v"))
		cancel()
		require.NoError(t, err, "call %d", i+1)
		select {
		case <-wctx.asked:
			t.Fatalf("call %d waited for room in the window", i+1)
		default:
		}
		ps = append(ps, p)
	}
	wctx := newWaitedCtx()
	var cancel context.CancelFunc
	wctx.Context, cancel = context.WithCancel(context.Background())
	blocked := make(chan error, 1)
	go func() {
		_, err := q.EnqueueAsync(wctx, []byte("one too many"))
		blocked <- err
	}()
	select {
	case <-wctx.asked: // it waits on its context: the window is full
	case err := <-blocked:
		t.Fatalf("call 4097 returned (%v) with 4096 records in flight", err)
	case <-time.After(30 * time.Second): // a hang detector
		t.Fatal("call 4097 neither returned nor waited")
	}
	cancel()
	require.ErrorIs(t, <-blocked, context.Canceled)
	release()
	for _, p := range ps {
		require.NoError(t, p.Wait(ctx))
	}
}
