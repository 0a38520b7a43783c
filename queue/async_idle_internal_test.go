package queue

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/wal"
)

// heldWrite is the real file system, but once armed it holds the log's
// next batch write until the test releases it.
type heldWrite struct {
	wal.OSFS
	mu    sync.Mutex
	armed bool
	held  chan struct{} // closed once the armed write waits
	freed chan struct{} // closed to let it go on
}

func (h *heldWrite) StoreOp(op string) error {
	h.mu.Lock()
	hold := h.armed && op == wal.StoreWriteBatch
	h.armed = h.armed && !hold
	h.mu.Unlock()
	if hold {
		close(h.held)
		<-h.freed
	}
	return nil
}

// A consumer with nothing to deliver waited for the write of the oldest
// asynchronous group not yet written, a group of settles alone included,
// though it makes nothing readable at the cursor. Under SyncNever and
// SyncInterval the log writes such a group up to a millisecond late
// (AppendLate), and the consumer then woke to look again for nothing:
// a consumer that acks each message with AckAsync and goes back to an
// empty queue looked 4 times per message instead of 2
// (BenchmarkIdleConsumer). It now waits only for a group that holds an
// enqueue, whose write may give it a message.
func TestIdleConsumerWaitsForNoSettleWrite(t *testing.T) {
	ctx := context.Background()
	for name, mode := range map[string]SyncMode{"SyncNever": SyncNever, "SyncInterval": SyncInterval} {
		t.Run(name, func(t *testing.T) {
			h := &heldWrite{held: make(chan struct{}), freed: make(chan struct{})}
			q, err := Open(t.TempDir(), &Options{FS: h, Sync: mode, SyncInterval: time.Hour})
			require.NoError(t, err)
			var release sync.Once
			free := func() { release.Do(func() { close(h.freed) }) }
			defer q.Close()
			defer free() // before Close, should the test fail with the write held
			_, err = q.Enqueue(ctx, []byte("x"))
			require.NoError(t, err)
			m, err := q.Dequeue(ctx)
			require.NoError(t, err)

			h.mu.Lock()
			h.armed = true
			h.mu.Unlock()
			ack, err := m.AckAsync()
			require.NoError(t, err)
			<-h.held // the ack's group is taken, its write held
			q.mu.Lock()
			w := q.asyncWrittenLocked()
			q.mu.Unlock()
			require.Nil(t, w, "a group of settles alone gives a consumer nothing to wait for")

			enq, err := q.EnqueueAsync(ctx, []byte("y"))
			require.NoError(t, err)
			q.mu.Lock()
			w = q.asyncWrittenLocked()
			q.mu.Unlock()
			require.NotNil(t, w, "the write of an enqueue may give a consumer a message")
			free()
			require.NoError(t, ack.Wait(ctx))
			require.NoError(t, enq.Wait(ctx))
			<-w
			got, err := q.Dequeue(ctx)
			require.NoError(t, err)
			require.Equal(t, "y", string(got.Payload))
		})
	}
}
