package queue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// onWait is a context that runs f the first time a call waits on it (its
// first Done), and never ends.
type onWait struct {
	context.Context
	once sync.Once
	f    func()
}

func (c *onWait) Done() <-chan struct{} {
	c.once.Do(c.f)
	return c.Context.Done()
}

// An EnqueueAsync that waits for room in the MaxPending window is stamped
// when it gets its turn, not when it was called: a message accepted ten
// minutes after the call (a slow disk kept the window full) is not ten
// minutes old when it enters the queue, and its Delay counts from there,
// so it is not delivered before Delay has passed in the queue. Stamped at
// the call, its EnqueuedAt (and Stats' oldest age, and the ack latency)
// counted the producer's wait, and its delay had run out before the
// message was appended.
func TestEnqueueAsyncStampedWhenAccepted(t *testing.T) {
	const blocked, delay = 10 * time.Minute, time.Minute
	clk := newFakeClock()
	g := newWriteGate(nil)
	q := open(t, t.TempDir(), &queue.Options{FS: g, Clock: clk, ManualRequeue: true, MaxPending: 1})
	defer q.Close()
	g.arm()
	first, err := q.EnqueueAsync(context.Background(), []byte("first"))
	require.NoError(t, err)
	<-g.held // the window is full until its write is made
	called := clk.Now()
	ctx := &onWait{Context: context.Background(), f: func() {
		clk.Advance(blocked) // while the call waits for room
		close(g.freed)
	}}
	p, err := q.EnqueueAsync(ctx, []byte("delayed"), queue.WithDelay(delay))
	require.NoError(t, err)
	require.NoError(t, first.Wait(context.Background()))
	require.NoError(t, p.Wait(context.Background()))

	var ready []string
	for {
		m, err := q.TryDequeue()
		if err != nil {
			require.ErrorIs(t, err, queue.ErrEmpty)
			break
		}
		ready = append(ready, string(m.Payload))
	}
	require.Equal(t, []string{"first"}, ready, "the delayed message was delivered before its Delay passed since it was accepted")
	clk.Advance(delay)
	m := tryDequeue(t, q)
	require.Equal(t, "delayed", string(m.Payload))
	require.Equal(t, called.Add(blocked).UnixNano(), m.EnqueuedAt.UnixNano(), "EnqueuedAt is when the call got its turn")
}

// A call that waited for room in the window is stamped again but keeps
// its producer-given id: behind an enqueue of the same id, it is told
// ErrDuplicate once that one is durable, and the queue holds the message
// once.
func TestEnqueueAsyncWaitedKeepsID(t *testing.T) {
	g := newWriteGate(nil)
	q := open(t, t.TempDir(), &queue.Options{FS: g, ManualRequeue: true, MaxPending: 1})
	defer q.Close()
	ctx := context.Background()
	g.arm()
	first, err := q.EnqueueAsync(ctx, []byte("v"), queue.WithID("order-7"))
	require.NoError(t, err)
	<-g.held // the window is full until its write is made
	waits := &onWait{Context: ctx, f: func() { close(g.freed) }}
	p, err := q.EnqueueAsync(waits, []byte("v"), queue.WithID("order-7"))
	require.ErrorIs(t, err, queue.ErrDuplicate, "the call that waited for the window lost its producer-given id")
	require.Nil(t, p)
	require.NoError(t, first.Wait(ctx))
	require.Equal(t, "order-7", tryDequeue(t, q).ID)
	requireEmpty(t, q) // once, not twice
}
