package queue_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestAckQueueReplaysAsLive runs random enqueues (some delayed),
// dequeues, acks, nacks with delays, extends, dead-letterings, requeues
// of expired leases and of dead letters, Stats, Browse and clock steps
// forward and back, stops at a random point, and compares what the live
// queue holds and delivers with its crash image and with the crash image
// of the queue after a Compact (the snapshot path): the counts, the
// messages Browse lists in each state, and the messages a dequeue gets
// now and once the clock has moved on. Half the seeds start a minute
// before 1970, so that the clock's steps cross the unix epoch. 80 seeds,
// 20 under the race detector.
func TestAckQueueReplaysAsLive(t *testing.T) {
	seeds := uint64(80)
	if raceEnabled {
		seeds = 20
	}
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			dir := t.TempDir()
			clk := newFakeClock()
			if seed%2 == 1 {
				clk.Advance(time.Unix(-60, 0).Sub(clk.Now()))
			}
			o := &queue.Options{Clock: clk, ManualRequeue: true, AckTimeout: 30 * time.Second, MaxDeliveries: 3}
			q := open(t, dir, o)
			defer q.Close()
			kept := randomAckRun(t, rng, q, clk)
			requireReplaysAsLive(t, rng, dir, q, kept, func(dir string) *queue.Queue { return open(t, dir, o) },
				func(q *queue.Queue) ackView { return probeAck(t, q, clk) })
		})
	}
}

// randomAckRun makes between 10 and 80 random calls on q and returns the
// messages it may hold leases of: delivered and not settled.
func randomAckRun(t *testing.T, rng *rand.Rand, q *queue.Queue, clk interface{ Advance(time.Duration) }) []*queue.Message {
	ctx := context.Background()
	delay := func() time.Duration { return time.Duration(rng.IntN(60)) * time.Second }
	var kept []*queue.Message
	for i := range 10 + rng.IntN(71) {
		switch op := rng.IntN(20); {
		case op < 5:
			var opts []queue.EnqueueOption
			if rng.IntN(2) == 0 {
				opts = append(opts, queue.WithDelay(delay()))
			}
			_, err := q.Enqueue(ctx, []byte(fmt.Sprint("m", i)), opts...)
			require.NoError(t, err)
		case op < 9:
			m, err := q.TryDequeue()
			if err != nil {
				require.ErrorIs(t, err, queue.ErrEmpty)
				continue
			}
			kept = append(kept, m)
		case op < 13 && len(kept) > 0:
			j := rng.IntN(len(kept))
			m := kept[j]
			kept = append(kept[:j], kept[j+1:]...)
			if rng.IntN(4) == 0 {
				if err := m.Extend(time.Second + delay()); err != nil { // Extend refuses 0
					require.ErrorIs(t, err, queue.ErrLeaseLost)
				}
				kept = append(kept, m)
				continue
			}
			if !settleAny(t, rng, m) {
				kept = append(kept, m) // a step back of the clock may give the lease back
			}
		case op < 14:
			_, err := q.RequeueExpired()
			require.NoError(t, err)
		case op < 15:
			_, err := q.RequeueAllDead()
			require.NoError(t, err)
		case op < 16:
			q.Stats()
		case op < 17:
			_, err := q.Browse(queue.StateReady, 0, 100)
			require.NoError(t, err)
		default:
			clk.Advance(time.Duration(rng.IntN(81)-40) * time.Second)
		}
	}
	return kept
}

// ackView is what probeAck sees of a queue.
type ackView struct {
	counts  [10]int64           // Stats: Ready, Delayed, InFlight, Dead, Enqueued, Delivered, Acked, Nacked, Expired, DeadLettered
	listed  map[string][]string // Browse: state -> "seq@due/deliveries" of each message
	now     []string            // the payloads and delivery counts of a drain now
	later   []string            // and of a drain after the clock moved on a minute
	expired int                 // leases RequeueExpired ended after both drains and 31 s more
}

// probeAck looks at q, then drains it at the clock's time and a minute
// later; it leaves the clock where it found it.
func probeAck(t *testing.T, q *queue.Queue, clk interface{ Advance(time.Duration) }) ackView {
	t.Helper()
	s := q.Stats()
	v := ackView{counts: [10]int64{s.Ready, s.Delayed, s.InFlight, s.Dead, int64(s.Enqueued), int64(s.Delivered),
		int64(s.Acked), int64(s.Nacked), int64(s.Expired), int64(s.DeadLettered)}, listed: map[string][]string{}}
	for _, st := range []queue.MessageState{queue.StateReady, queue.StateDelayed, queue.StateInFlight, queue.StateDead} {
		ms, err := q.Browse(st, 0, 1000)
		require.NoError(t, err)
		for _, m := range ms {
			v.listed[st.String()] = append(v.listed[st.String()], fmt.Sprintf("%d@%d/%d", m.Seq, m.Due.UnixNano(), m.Deliveries))
		}
	}
	drain := func() []string {
		var out []string
		for {
			m, err := q.TryDequeue()
			if err != nil {
				require.ErrorIs(t, err, queue.ErrEmpty)
				return out
			}
			out = append(out, fmt.Sprintf("%s/%d", m.Payload, m.Deliveries))
		}
	}
	v.now = drain()
	clk.Advance(time.Minute)
	v.later = drain()
	clk.Advance(31 * time.Second)
	n, err := q.RequeueExpired()
	require.NoError(t, err)
	v.expired = n
	clk.Advance(-time.Minute - 31*time.Second)
	return v
}
