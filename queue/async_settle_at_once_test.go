package queue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// An asynchronous ack or dead-letter takes the message out of the queue
// at once, as the README says: while its write is still held, the message
// is neither in flight nor delivered again, not even once its lease's
// deadline has passed.
func TestAsyncSettleTakesTheMessageOutAtOnce(t *testing.T) {
	for name, settle := range map[string]func(m *queue.Message, q *queue.Queue) (*queue.Pending, error){
		"AckAsync": func(m *queue.Message, _ *queue.Queue) (*queue.Pending, error) { return m.AckAsync() },
		"SettleAsync dead-letter": func(m *queue.Message, q *queue.Queue) (*queue.Pending, error) {
			return q.SettleAsync(queue.Settlement{Receipt: m.Receipt, Op: queue.SettleDeadLetter, Reason: "poison"})
		},
	} {
		t.Run(name, func(t *testing.T) {
			clk := newFakeClock()
			g := newWriteGate(nil)
			q := open(t, t.TempDir(), &queue.Options{FS: g, Clock: clk, AckTimeout: time.Minute, ManualRequeue: true})
			defer q.Close()
			enqueue(t, q, "a")
			m := tryDequeue(t, q)
			g.arm()
			p, err := settle(m, q)
			require.NoError(t, err)
			<-g.held
			var free sync.Once
			release := func() { free.Do(func() { close(g.freed) }) }
			defer release() // before Close, which waits for the write, on a failure
			requireEmpty(t, q)
			require.Zero(t, q.Stats().InFlight)
			clk.Advance(time.Hour)
			n, err := q.RequeueExpired()
			require.NoError(t, err)
			require.Zero(t, n, "the settled message's lease is not requeued")
			requireEmpty(t, q)
			release()
			require.NoError(t, p.Wait(context.Background()))
			requireEmpty(t, q)
		})
	}
}
