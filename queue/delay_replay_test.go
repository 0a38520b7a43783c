package queue_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestDueDelayReplaysAsLive: a delay (of an enqueue or of a nack) whose
// time has come, seen by a call (Stats, Browse, a dequeue) before the
// clock steps back below it, holds the message back again, live as in a
// replay of the log: whether a delayed message is ready depends on its
// time and the clock, not on what asked first. The old code made it ready
// for good at the first call that saw it due, while a replay set the delay
// again.
func TestDueDelayReplaysAsLive(t *testing.T) {
	for _, c := range []struct {
		name string
		seen func(t *testing.T, q *queue.Queue) // a call made while the delay has passed
	}{
		{"stats", func(t *testing.T, q *queue.Queue) { q.Stats() }},
		{"browse", func(t *testing.T, q *queue.Queue) {
			_, err := q.Browse(queue.StateReady, 0, 10)
			require.NoError(t, err)
		}},
		{"dequeue", func(t *testing.T, q *queue.Queue) { // acked: an open would end its lease
			m := tryDequeue(t, q)
			require.Equal(t, "first", string(m.Payload))
			require.NoError(t, m.Ack())
		}},
	} {
		for _, nack := range []bool{false, true} {
			name := c.name + "/enqueue-delay"
			if nack {
				name = c.name + "/nack-delay"
			}
			t.Run(name, func(t *testing.T) {
				clock := newFakeClock()
				dir := t.TempDir()
				o := &queue.Options{Clock: clock, ManualRequeue: true, AckTimeout: time.Hour}
				q := open(t, dir, o)
				defer q.Close()
				delayed(t, q, "first", nack)
				delayed(t, q, "second", nack)
				clock.Advance(10 * time.Second)
				c.seen(t, q)
				clock.Advance(-20 * time.Second)
				img := crashImage(t, dir)
				live := probeDelayed(t, q)
				require.NoError(t, q.Close())
				r := open(t, img, o)
				defer r.Close()
				require.Equal(t, live, probeDelayed(t, r), "the reopened queue holds back what the live one held back")
				require.Equal(t, "held", live.next, "a delay whose time is again ahead holds the message back")
			})
		}
	}
}

// delayed makes a message with payload p that waits 10 s: enqueued with
// the delay, or delivered and nacked with it.
func delayed(t *testing.T, q *queue.Queue, p string, nack bool) {
	t.Helper()
	if !nack {
		enqueue(t, q, p, queue.WithDelay(10*time.Second))
		return
	}
	enqueue(t, q, p)
	m := tryDequeue(t, q)
	require.NoError(t, m.Nack(10*time.Second))
}

// delayedView is what probeDelayed sees of a queue.
type delayedView struct {
	ready, delayed int64    // Stats
	listed         int      // messages Browse lists as ready
	peeked         []string // "seq state" Peek gives each message Browse lists ready or delayed
	next           string   // the payload a dequeue gets, "held" when none
}

func probeDelayed(t *testing.T, q *queue.Queue) delayedView {
	t.Helper()
	s := q.Stats()
	ready, err := q.Browse(queue.StateReady, 0, 100)
	require.NoError(t, err)
	held, err := q.Browse(queue.StateDelayed, 0, 100)
	require.NoError(t, err)
	v := delayedView{ready: s.Ready, delayed: s.Delayed, listed: len(ready), next: "held"}
	for _, m := range append(ready, held...) {
		p, err := q.Peek(m.Seq)
		require.NoError(t, err)
		v.peeked = append(v.peeked, fmt.Sprint(m.Seq, " ", p.State))
	}
	slices.Sort(v.peeked)
	m, err := q.TryDequeue()
	if err == nil {
		v.next = string(m.Payload)
	} else {
		require.ErrorIs(t, err, queue.ErrEmpty)
	}
	return v
}
