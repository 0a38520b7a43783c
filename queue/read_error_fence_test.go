package queue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// damagedReady opens a queue whose message "broken" is ready, its payload
// in a sealed segment that the returned function damages (and, called
// again, restores: a read error that passes, as an I/O error may).
func damagedReady(t *testing.T) (*queue.Queue, *fakeclock.Clock, string, func()) {
	t.Helper()
	clock := newFakeClock()
	o := queue.Options{SegmentSize: 4096, ManualRequeue: true, Clock: clock, AckTimeout: time.Minute}
	testhook.SetManualCompaction(&o)
	dir := t.TempDir()
	q := open(t, dir, &o)
	t.Cleanup(func() { q.Close() })
	pad := string(bytes.Repeat([]byte("p"), 600))
	broken := enqueue(t, q, "BROKEN|"+pad, queue.WithID("broken"))
	for i := range 7 {
		enqueue(t, q, fmt.Sprint("f", i, "|", pad))
	}
	require.Len(t, segments(t, dir), 2, "the message's segment is sealed")
	ms, err := q.DequeueBatch(context.Background(), 8)
	require.NoError(t, err)
	require.Len(t, ms, 8)
	for _, m := range ms {
		if m.ID == broken {
			require.NoError(t, m.Nack(time.Minute)) // its payload is read from the log when due
			continue
		}
		require.NoError(t, m.Ack())
	}
	clock.Advance(2 * time.Minute)
	seg, damaged := segments(t, dir)[0], false
	flip := func() {
		mark := []byte("BROKEN")
		if damaged {
			mark = []byte("bROKEN")
		}
		corruptSegment(t, seg, mark)
		damaged = !damaged
	}
	return q, clock, broken, flip
}

// A ReadError of the ack queue named the message by id alone, and the
// docs had the caller dead-letter it with DeadLetterID, which takes the
// message from whichever delivery holds it now: once the lease ran out,
// that could be another consumer's sound delivery. The ReadError now
// carries the failed delivery's receipt, and DeadLetter with it is fenced.
func TestReadErrorDeliveryIsFenced(t *testing.T) {
	t.Run("stale", func(t *testing.T) {
		q, clock, broken, flip := damagedReady(t)
		flip()
		_, err := q.Dequeue(context.Background())
		require.ErrorIs(t, err, queue.ErrCorrupt)
		var re *queue.ReadError
		require.True(t, errors.As(err, &re), "%v", err)
		require.Equal(t, broken, re.ID)
		require.Equal(t, re.Seq, re.Delivery.Seq)
		require.NotZero(t, re.Delivery.Lease)
		require.NotZero(t, re.Delivery.At)

		flip() // the read error passes
		clock.Advance(2 * time.Minute)
		n, err := q.RequeueExpired()
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.ErrorIs(t, q.DeadLetter(re.Delivery, "unreadable"), queue.ErrLeaseLost, "back in the queue, not the failed delivery's")

		m := tryDequeue(t, q)
		require.Equal(t, broken, m.ID)
		require.True(t, strings.HasPrefix(string(m.Payload), "BROKEN|"))
		require.ErrorIs(t, q.DeadLetter(re.Delivery, "unreadable"), queue.ErrLeaseLost, "another delivery holds it")
		require.NoError(t, m.Ack(), "the sound delivery keeps its message")
		require.Zero(t, q.Stats().Dead)
	})
	t.Run("fresh", func(t *testing.T) {
		q, _, broken, flip := damagedReady(t)
		flip()
		_, err := q.Dequeue(context.Background())
		var re *queue.ReadError
		require.True(t, errors.As(err, &re), "%v", err)
		require.NoError(t, q.DeadLetter(re.Delivery, "unreadable"))
		dead, err := q.DeadLetters(0, 0)
		require.NoError(t, err)
		require.Len(t, dead, 1)
		require.Equal(t, broken, dead[0].ID)
		require.True(t, strings.HasPrefix(dead[0].Reason, "unreadable; corrupt record: "), dead[0].Reason)
		require.Zero(t, q.Stats().InFlight)
	})
}
