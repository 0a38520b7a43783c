package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// An Enqueue or EnqueueBatch that waits for the enqueue holding its
// producer-given id is stamped when it is appended, as EnqueueAsync is:
// the holder's message can be delivered and acked (its id forgotten,
// with no dedup window) while the call waits for the holder's write, and
// the call then appends its message. Stamped before the wait, that
// message's EnqueuedAt counted the wait, and its Delay ran from before
// it was in the queue, so it was delivered at once after a wait as long
// as the delay.
func TestEnqueueHeldStampedWhenAppended(t *testing.T) {
	const blocked, delay = 10 * time.Minute, time.Minute
	calls := map[string]func(q *queue.Queue, ctx context.Context) error{
		"Enqueue": func(q *queue.Queue, ctx context.Context) error {
			_, err := q.Enqueue(ctx, []byte("delayed"), queue.WithID("order-7"), queue.WithDelay(delay))
			return err
		},
		"EnqueueBatch": func(q *queue.Queue, ctx context.Context) error {
			_, err := q.EnqueueBatch(ctx, []queue.Item{{ID: "order-7", Payload: []byte("delayed"), Delay: delay}})
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			clk := newFakeClock()
			g := newWriteGate(nil)
			q := open(t, t.TempDir(), &queue.Options{FS: g, Clock: clk, ManualRequeue: true})
			defer q.Close()
			g.arm()
			first, err := q.EnqueueAsync(context.Background(), []byte("first"), queue.WithID("order-7"))
			require.NoError(t, err)
			<-g.held // the id is held until its write is made
			called := clk.Now()
			ctx := &onWait{Context: context.Background(), f: func() {
				clk.Advance(blocked) // while the call waits for the holder
				close(g.freed)
				require.NoError(t, first.Wait(context.Background()))
				m := tryDequeue(t, q)
				require.Equal(t, "first", string(m.Payload))
				require.NoError(t, m.Ack()) // the id is forgotten: no dedup window
			}}
			require.NoError(t, call(q, ctx))

			_, err = q.TryDequeue()
			require.ErrorIs(t, err, queue.ErrEmpty, "the delayed message was delivered before its Delay passed since it was appended")
			clk.Advance(delay)
			m := tryDequeue(t, q)
			require.Equal(t, "delayed", string(m.Payload))
			require.Equal(t, called.Add(blocked).UnixNano(), m.EnqueuedAt.UnixNano(), "EnqueuedAt is when the call appended it")
		})
	}
}
