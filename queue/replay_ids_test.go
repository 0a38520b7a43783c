package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestCrashReopenKeepsIDs: a queue opened after a crash, from a log
// replayed record by record from the reader's reused buffer, holds every
// message under the id it was enqueued with: the messages it lists in
// each state, the producer-given ids it refuses again (pending, delayed,
// leased, dead and acked ones), the dead letter it requeues by id, and
// the messages it delivers afterwards, delayed ones included, carry the
// same ids as before the crash, leased ones included. Nothing is compacted: every record since
// the queue's start is replayed.
func TestCrashReopenKeepsIDs(t *testing.T) {
	ctx := context.Background()
	clk, dir := newFakeClock(), t.TempDir()
	o := &queue.Options{Clock: clk, ManualRequeue: true, AckTimeout: time.Hour, DedupWindow: time.Hour}
	q := open(t, dir, o)

	idOf := map[string]string{} // payload -> id
	var producerIDs []string
	for i := range 40 {
		payload := fmt.Sprint("m", i)
		var opts []queue.EnqueueOption
		if i%2 == 1 {
			id := fmt.Sprint("producer-", i)
			opts = append(opts, queue.WithID(id))
			producerIDs = append(producerIDs, id)
		}
		if i%4 >= 2 {
			opts = append(opts, queue.WithDelay(time.Minute))
		}
		idOf[payload] = enqueue(t, q, payload, opts...)
	}
	// Leases from the cursor (their records carry the id), an ack of a
	// producer-given id, and a dead letter.
	var dead string
	for i := range 6 {
		m := tryDequeue(t, q)
		require.Equal(t, idOf[string(m.Payload)], m.ID)
		switch i {
		case 1:
			require.NoError(t, m.Ack())
		case 2:
			require.NoError(t, m.DeadLetter("why"))
			dead = m.ID
		}
	}
	live := browseAll(t, q)

	img := crashImage(t, dir)
	require.NoError(t, q.Close())
	r := open(t, img, o)
	defer r.Close()
	require.False(t, r.Recovery().Clean, "not an open after a crash")

	require.Equal(t, live, browseAll(t, r), "the reopened queue lists other ids")
	for _, id := range producerIDs {
		_, err := r.Enqueue(ctx, []byte("again"), queue.WithID(id))
		require.ErrorIs(t, err, queue.ErrDuplicate, "producer id %s after the reopen", id)
	}
	require.NoError(t, r.RequeueDead(dead))
	clk.Advance(2 * time.Minute)
	for {
		m, err := r.TryDequeue()
		if err != nil {
			require.ErrorIs(t, err, queue.ErrEmpty)
			break
		}
		require.Equal(t, idOf[string(m.Payload)], m.ID, "message %q delivered after the reopen", m.Payload)
	}
}

// browseAll returns the id of every message q lists in any state, by
// Seq. (An open after a crash ends the leases of the process that died:
// their messages are ready again.)
func browseAll(t *testing.T, q *queue.Queue) map[uint64]string {
	t.Helper()
	out := map[uint64]string{}
	for st := queue.StateReady; st <= queue.StateDead; st++ {
		ms, err := q.Browse(st, 0, 1000)
		require.NoError(t, err)
		for _, m := range ms {
			out[m.Seq] = m.ID
		}
	}
	return out
}
