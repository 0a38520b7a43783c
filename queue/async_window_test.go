package queue_test

import (
	"context"
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
