package redisq

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestStaleAndLiveReceiptInOneCall: concurrent Acks are settled by one
// call, in the order they came. A stale receipt of a message gathered
// before the receipt of its live delivery fails alone: the live one
// still acks the message.
func TestStaleAndLiveReceiptInOneCall(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	q, err := Open(ctx, srv.Client(), "stale-first", nil)
	require.NoError(t, err)
	defer q.Close()
	for _, stale := range []bool{true, false} {
		_, err = q.Enqueue(ctx, []byte("x"))
		require.NoError(t, err)
		old, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, old.Nack(0))
		live, err := q.TryDequeue()
		require.NoError(t, err)
		require.Equal(t, old.Receipt.Seq, live.Receipt.Seq)

		rs := []queue.Receipt{old.Receipt, live.Receipt}
		if !stale {
			rs[0], rs[1] = rs[1], rs[0]
		}
		errs := q.settle("ack", "", rs)
		for i, r := range rs {
			if r == live.Receipt {
				require.NoError(t, errs[i], "the live delivery's ack (stale receipt first: %v)", stale)
			} else {
				require.ErrorIs(t, errs[i], queue.ErrLeaseLost)
			}
		}
		_, err = q.TryDequeue()
		require.ErrorIs(t, err, queue.ErrEmpty)
		require.Zero(t, q.Stats().InFlight)
	}
}

// TestGatheredAckPastDeadline: acks gathered into one call are fenced one
// by one: the receipt whose lease ran out (not yet ended by any
// housekeeper) fails, the others ack.
func TestGatheredAckPastDeadline(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	clock := queuetest.NewClock()
	q, err := Open(ctx, srv.Client(), "past-deadline", &Options{Clock: clock, AckTimeout: time.Minute, ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("a")}, {Payload: []byte("b")}, {Payload: []byte("c")}})
	require.NoError(t, err)
	ms, err := q.DequeueBatch(ctx, 3)
	require.NoError(t, err)
	require.Len(t, ms, 3)
	require.NoError(t, ms[1].Extend(time.Second))
	clock.Advance(2 * time.Second)

	errs := q.settle("ack", "", []queue.Receipt{ms[0].Receipt, ms[1].Receipt, ms[2].Receipt})
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], queue.ErrLeaseLost, "its lease ran out at its deadline")
	require.NoError(t, errs[2])
	s := q.Stats()
	require.Equal(t, int64(1), s.InFlight, "the lapsed lease waits for a housekeeper")
	n, err := q.RequeueExpired()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "b", string(m.Payload))
	require.Equal(t, 2, m.Deliveries)
}

// TestStaleReceiptFirstOtherOps: a nack, extend or dead-letter call that
// names a stale receipt of a message before the receipt of its live
// delivery (or after it) settles the live delivery once: the stale
// receipt fails alone, and the message ends up as the op says.
func TestStaleReceiptFirstOtherOps(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	ops := []struct {
		op, arg string
		check   func(t *testing.T, q *Queue, live *queue.Message)
	}{
		{"nack", "0", func(t *testing.T, q *Queue, live *queue.Message) {
			m, err := q.TryDequeue()
			require.NoError(t, err, "nacked: ready again")
			require.Equal(t, live.Receipt.Seq, m.Receipt.Seq)
			require.Equal(t, live.Deliveries+1, m.Deliveries)
			require.NoError(t, m.Ack())
		}},
		{"extend", micros(time.Hour), func(t *testing.T, q *Queue, live *queue.Message) {
			dl, err := srv.Client().ZScore(ctx, q.keys[4], strconv.FormatUint(live.Receipt.Seq, 10)).Result()
			require.NoError(t, err)
			require.Greater(t, dl, float64(time.Now().Add(59*time.Minute).UnixMicro()), "the live lease runs for the hour")
			require.NoError(t, live.Ack())
		}},
		{"dead", "why", func(t *testing.T, q *Queue, live *queue.Message) {
			_, err := q.TryDequeue()
			require.ErrorIs(t, err, queue.ErrEmpty)
			require.Equal(t, int64(1), q.Stats().Dead)
			n, err := q.PurgeAllDead()
			require.NoError(t, err)
			require.Equal(t, 1, n)
		}},
	}
	for _, o := range ops {
		for _, stale := range []bool{true, false} {
			name := fmt.Sprintf("%s/stale-first=%v", o.op, stale)
			t.Run(name, func(t *testing.T) {
				q, err := Open(ctx, srv.Client(), name, &Options{AckTimeout: time.Minute})
				require.NoError(t, err)
				defer q.Close()
				_, err = q.Enqueue(ctx, []byte("x"))
				require.NoError(t, err)
				old, err := q.TryDequeue()
				require.NoError(t, err)
				require.NoError(t, old.Nack(0))
				live, err := q.TryDequeue()
				require.NoError(t, err)
				require.Equal(t, old.Receipt.Seq, live.Receipt.Seq)

				rs := []queue.Receipt{old.Receipt, live.Receipt}
				if !stale {
					rs[0], rs[1] = rs[1], rs[0]
				}
				errs := q.settle(o.op, o.arg, rs)
				for i, r := range rs {
					if r == live.Receipt {
						require.NoError(t, errs[i], "the live delivery's %s", o.op)
					} else {
						require.ErrorIs(t, errs[i], queue.ErrLeaseLost, "the stale receipt's %s", o.op)
					}
				}
				o.check(t, q, live)
				s := q.Stats()
				require.Zero(t, s.Ready+s.InFlight+s.Delayed+s.Dead)
			})
		}
	}
}

// TestSameLiveReceiptTwiceInOneCall: a call of the general settle path
// that names one live receipt twice settles the message once; the second
// mention finds the delivery over and fails with ErrLeaseLost.
func TestSameLiveReceiptTwiceInOneCall(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for _, op := range []struct{ op, arg string }{{"extend", micros(time.Hour)}, {"nack", "0"}, {"dead", "x"}} {
		t.Run(op.op, func(t *testing.T) {
			q, err := Open(ctx, srv.Client(), "twice-"+op.op, nil)
			require.NoError(t, err)
			defer q.Close()
			_, err = q.Enqueue(ctx, []byte("x"))
			require.NoError(t, err)
			m, err := q.TryDequeue()
			require.NoError(t, err)
			errs := q.settle(op.op, op.arg, []queue.Receipt{m.Receipt, m.Receipt})
			require.NoError(t, errs[0])
			require.ErrorIs(t, errs[1], queue.ErrLeaseLost)
		})
	}
}

// farClock stands still far ahead: times in µs past 2^53, where a double
// no longer holds every integer.
// It moves only when the test says (the housekeeper reads it meanwhile).
type farClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *farClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *farClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *farClock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }

// TestFarFutureClock: a whole cycle with the clock in the year 2300 (µs
// about 1.04e16): lease, extend, ack, nack with a delay, promotion when
// due, dedup.
func TestFarFutureClock(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c := &farClock{t: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}
	require.Greater(t, c.Now().UnixMicro(), int64(1)<<53)
	q, err := Open(ctx, srv.Client(), "far", &Options{Clock: c, AckTimeout: time.Hour, DedupWindow: time.Hour, ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("a"))
	require.NoError(t, err)
	_, err = q.EnqueueBatch(ctx, []queue.Item{{ID: "p", Payload: []byte("p")}, {ID: "l", Payload: []byte("l"), Delay: time.Minute}})
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "a", string(m.Payload))
	require.NoError(t, m.Extend(2*time.Hour))
	require.NoError(t, m.Ack())
	m, err = q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "p", m.ID)
	require.NoError(t, m.Nack(time.Minute))
	_, err = q.TryDequeue()
	require.ErrorIs(t, err, queue.ErrEmpty, "both delayed a minute")
	c.add(time.Minute)
	ms, err := q.DequeueBatch(ctx, 5)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	for _, m := range ms {
		require.NoError(t, m.Ack())
	}
	_, err = q.EnqueueBatch(ctx, []queue.Item{{ID: "p", Payload: []byte("p")}})
	require.ErrorIs(t, err, queue.ErrDuplicate)
	s := q.Stats()
	require.Zero(t, s.Ready+s.InFlight+s.Delayed+s.Dead)
}

// TestAckFenceAroundRunOutLeases: a lone Ack fails once its lease has
// run out, also before any housekeeper ended it, and succeeds while the
// lease is ahead, whether other leases have run out or not, for a
// generated id and one a producer gave. A receipt whose message holds
// its token but no lease (the lease's member removed by hand) fails and
// leaves the message as it was.
func TestAckFenceAroundRunOutLeases(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	clock := queuetest.NewClock()
	q, err := Open(ctx, rdb, "fence", &Options{Clock: clock, AckTimeout: time.Minute, ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	lease := func() *queue.Message {
		t.Helper()
		m, err := q.TryDequeue()
		require.NoError(t, err)
		return m
	}
	for _, p := range []string{"a", "b", "c"} {
		_, err := q.Enqueue(ctx, []byte(p))
		require.NoError(t, err)
	}
	_, err = q.Enqueue(ctx, []byte("d"), queue.WithID("given"))
	require.NoError(t, err)

	a := lease()
	clock.Advance(30 * time.Second)
	b, c, d := lease(), lease(), lease()
	clock.Advance(45 * time.Second) // a's lease has run out, unended; b's, c's and d's are ahead
	require.ErrorIs(t, a.Ack(), queue.ErrLeaseLost)
	require.NoError(t, b.Ack())
	require.NoError(t, d.Ack(), "a producer's id")

	_, err = q.RequeueExpired() // no lease has run out now
	require.NoError(t, err)
	stale := c.Receipt
	stale.Lease++
	require.ErrorIs(t, q.settleOne("ack", "", stale), queue.ErrLeaseLost)
	require.NoError(t, rdb.ZRem(ctx, q.keys[4], strconv.FormatUint(c.Receipt.Seq, 10)).Err())
	require.ErrorIs(t, c.Ack(), queue.ErrLeaseLost, "no lease")
	fields, err := rdb.HMGet(ctx, q.keys[1], strconv.FormatUint(c.Receipt.Seq, 10), "b"+strconv.FormatUint(c.Receipt.Seq, 10)).Result()
	require.NoError(t, err)
	require.NotNil(t, fields[0], "the record stays")
	require.NotNil(t, fields[1], "the body stays")
	require.ErrorIs(t, b.Ack(), queue.ErrLeaseLost, "acked already")

	_, err = q.Enqueue(ctx, []byte("e"), queue.WithID("given too"))
	require.NoError(t, err)
	again, e := lease(), lease()
	require.Equal(t, "a", string(again.Payload))
	require.NoError(t, e.Ack(), "a producer's id, no lease run out")
	require.NoError(t, again.Ack())
}

// TestGatheredAcksTakeAck1: acks gathered into one call are fenced one
// by one by ack1: a receipt named twice acks once, a message whose lease
// is gone (removed by hand) fails and keeps its record and body, the
// others ack; a call that names a message a producer named goes whole to
// settle, which acks it and keeps its id refused for DedupWindow.
func TestGatheredAcksTakeAck1(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	clock := queuetest.NewClock()
	q, err := Open(ctx, rdb, "gathered", &Options{Clock: clock, AckTimeout: time.Minute, ManualRequeue: true,
		DedupWindow: time.Hour})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("a")}, {Payload: []byte("b")}, {Payload: []byte("c")}})
	require.NoError(t, err)
	ms, err := q.DequeueBatch(ctx, 3)
	require.NoError(t, err)
	require.Len(t, ms, 3)
	c := strconv.FormatUint(ms[2].Receipt.Seq, 10)
	require.NoError(t, rdb.ZRem(ctx, q.keys[4], c).Err())

	errs := q.settle("ack", "", []queue.Receipt{ms[0].Receipt, ms[1].Receipt, ms[0].Receipt, ms[2].Receipt})
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.ErrorIs(t, errs[2], queue.ErrLeaseLost, "acked by the first mention")
	require.ErrorIs(t, errs[3], queue.ErrLeaseLost, "no lease")
	fields, err := rdb.HMGet(ctx, q.keys[1], c, "b"+c).Result()
	require.NoError(t, err)
	require.NotNil(t, fields[0], "the record stays")
	require.NotNil(t, fields[1], "the body stays")

	_, err = q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("d")}, {ID: "given", Payload: []byte("e")}})
	require.NoError(t, err)
	ms, err = q.DequeueBatch(ctx, 2)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	codes, err := q.runAck1(context.Background(), []any{strconv.FormatUint(ms[0].Receipt.Seq, 10), strconv.FormatUint(ms[0].Receipt.Lease, 10),
		strconv.FormatUint(ms[1].Receipt.Seq, 10), strconv.FormatUint(ms[1].Receipt.Lease, 10)})
	require.NoError(t, err)
	require.Nil(t, codes, "a producer's id: the call is settle's")
	errs = q.settle("ack", "", []queue.Receipt{ms[0].Receipt, ms[1].Receipt})
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	_, err = q.Enqueue(ctx, []byte("e"), queue.WithID("given"))
	require.ErrorIs(t, err, queue.ErrDuplicate, "the acked id is refused for DedupWindow")
	_, err = q.TryDequeue()
	require.ErrorIs(t, err, queue.ErrEmpty)
}
