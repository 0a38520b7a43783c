package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A consumer that found nothing counts itself as a waiter only after that
// first look. A message written in between, whose producer then sees no
// waiter and wakes nobody, must still be found: the consumer looks again
// once counted. The seam, run in that gap, appends and writes an enqueue
// record there and wakes nobody, every round.
func TestDequeueFindsWriteBeforeItCounts(t *testing.T) {
	q, err := Open(t.TempDir(), &Options{Sync: SyncNever})
	require.NoError(t, err)
	defer q.Close()
	var round int
	produced := false
	q.foundNothing = func() { // under q.mu
		if produced {
			return
		}
		produced = true
		r := record{Op: opEnqueue, ID: "m", At: q.now(), Payload: []byte{byte(round)}}
		_, err := q.appendLocked(&r, nil)
		require.NoError(t, err)
		require.NoError(t, q.log.Flush())
	}
	ctx := context.Background()
	for round = range 50 {
		q.mu.Lock()
		produced = false
		q.mu.Unlock()
		got := make(chan *Message, 1)
		go func() {
			m, err := q.Dequeue(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- m
		}()
		select {
		case m := <-got:
			require.Equal(t, []byte{byte(round)}, m.Payload)
			require.NoError(t, m.Ack())
		case <-time.After(5 * time.Second):
			q.Close() // wakes the consumer
			t.Fatalf("round %d: the consumer slept through a message written before it counted itself", round)
		}
	}
}
