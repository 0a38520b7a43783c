package redisq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// dedupEnv opens handles with their own DedupWindow on one queue, all
// on one manual clock.
type dedupEnv struct {
	t     *testing.T
	rdb   *redis.Client
	name  string
	clock *queuetest.Clock
}

func newDedupEnv(t *testing.T, rdb *redis.Client) *dedupEnv {
	return &dedupEnv{t: t, rdb: rdb, name: fmt.Sprint("dedup-", queueNames.Add(1)), clock: queuetest.NewClock()}
}

// open returns a new handle on the queue whose window is window.
func (e *dedupEnv) open(window time.Duration) *redisq.Queue {
	e.t.Helper()
	q, err := redisq.Open(context.Background(), e.rdb, e.name, &redisq.Options{
		DedupWindow: window, Clock: e.clock, ManualRequeue: true, AckTimeout: time.Minute})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = q.Close() })
	return q
}

// enqueue enqueues payload under id with q and returns the error.
func enqueueID(q *redisq.Queue, id, payload string) error {
	_, err := q.Enqueue(context.Background(), []byte(payload), queue.WithID(id))
	return err
}

// deliverAck enqueues payload under id with q, dequeues it and acks it.
func deliverAck(t *testing.T, q *redisq.Queue, id, payload string) {
	t.Helper()
	require.NoError(t, enqueueID(q, id, payload))
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, payload, string(m.Payload))
	require.NoError(t, m.Ack())
}

// TestDedupWindowEdge: an id acked exactly DedupWindow ago is still
// refused, as by the embedded queue (it forgets an id only once its ack
// is older than the window); a microsecond later it is free.
func TestDedupWindowEdge(t *testing.T) {
	e := newDedupEnv(t, redistest.Start(t).Client())
	q := e.open(time.Minute)
	deliverAck(t, q, "x", "a")
	e.clock.Advance(time.Minute)
	require.Equal(t, 1, q.Stats().DedupIDs)
	require.ErrorIs(t, enqueueID(q, "x", "b"), queue.ErrDuplicate, "acked a window ago, at the edge")
	e.clock.Advance(time.Microsecond)
	require.Equal(t, 0, q.Stats().DedupIDs)
	deliverAck(t, q, "x", "c")
}

// TestDedupWindowIsTheHandles: handles with different windows share a
// queue; each refuses an acked id only within its own window, and a
// handle without one only live ids, whatever the clock reads (the ack's
// instant, or a step back).
func TestDedupWindowIsTheHandles(t *testing.T) {
	rdb := redistest.Start(t).Client()
	for name, back := range map[string]time.Duration{"same instant": 0, "clock stepped back": -time.Second} {
		t.Run(name, func(t *testing.T) {
			e := newDedupEnv(t, rdb)
			long, short, none := e.open(time.Hour), e.open(time.Minute), e.open(0)
			deliverAck(t, long, "x", "a")
			e.clock.Advance(back)
			require.ErrorIs(t, enqueueID(long, "x", "b"), queue.ErrDuplicate)
			require.ErrorIs(t, enqueueID(short, "x", "b"), queue.ErrDuplicate)
			require.Equal(t, 0, none.Stats().DedupIDs, "no window: no acked id counts")
			require.NoError(t, enqueueID(none, "x", "c"), "no window: an acked id is free")
			require.ErrorIs(t, enqueueID(long, "x", "d"), queue.ErrDuplicate, "live again")
			e.clock.Advance(2*time.Minute - back)
			require.NoError(t, none.AckID(mustDequeue(t, none, "c")))
			require.NoError(t, enqueueID(short, "x", "e"), "acked by a handle without a window: no stamp")
			require.NoError(t, short.AckID(mustDequeue(t, short, "e")))
			e.clock.Advance(2 * time.Minute)
			require.NoError(t, enqueueID(short, "x", "f"), "past the short window")
			require.NoError(t, short.AckID(mustDequeue(t, short, "f")))
			require.ErrorIs(t, enqueueID(long, "x", "g"), queue.ErrDuplicate, "within the long window")
		})
	}
}

// mustDequeue dequeues the next message with q, checks its payload and
// returns its id.
func mustDequeue(t *testing.T, q *redisq.Queue, payload string) string {
	t.Helper()
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, payload, string(m.Payload))
	return m.ID
}

// TestDedupIDAfterReenqueueWithoutWindow: a handle without a window
// that enqueues an acked id anew, then acks it, leaves no stamp of the
// earlier ack behind: a handle with a window takes the id, as an open
// with a window does after an open without one in the embedded queue.
func TestDedupIDAfterReenqueueWithoutWindow(t *testing.T) {
	e := newDedupEnv(t, redistest.Start(t).Client())
	with := e.open(time.Hour)
	deliverAck(t, with, "x", "a")
	require.NoError(t, with.Close())
	without := e.open(0)
	deliverAck(t, without, "x", "b")
	require.NoError(t, without.Close())
	with = e.open(time.Hour)
	require.NoError(t, enqueueID(with, "x", "c"), "the id was enqueued and acked again since its stamp")
	require.Equal(t, "x", mustDequeue(t, with, "c"))
}

// TestDedupWindowChangedBetweenOpens: a window shortened between opens
// forgets, at the next enqueue, the ids whose shorter window has passed,
// and a later open with a longer window does not bring them back; a
// window lengthened keeps refusing the ids not yet forgotten.
func TestDedupWindowChangedBetweenOpens(t *testing.T) {
	rdb := redistest.Start(t).Client()
	t.Run("shortened", func(t *testing.T) {
		e := newDedupEnv(t, rdb)
		q := e.open(time.Hour)
		deliverAck(t, q, "x", "a")
		require.NoError(t, q.Close())
		e.clock.Advance(2 * time.Minute)
		q = e.open(time.Minute)
		deliverAck(t, q, "y", "b")
		require.NoError(t, q.Close())
		q = e.open(time.Hour)
		require.NoError(t, enqueueID(q, "x", "c"))
		require.ErrorIs(t, enqueueID(q, "y", "d"), queue.ErrDuplicate)
	})
	t.Run("lengthened", func(t *testing.T) {
		e := newDedupEnv(t, rdb)
		q := e.open(time.Minute)
		deliverAck(t, q, "x", "a")
		require.NoError(t, q.Close())
		e.clock.Advance(2 * time.Minute)
		q = e.open(time.Hour)
		require.ErrorIs(t, enqueueID(q, "x", "b"), queue.ErrDuplicate, "not forgotten: no enqueue past the short window")
	})
}

// TestDedupStampsOutliveHandleWithoutWindow pins a difference from the
// embedded queue: a handle without a window leaves the stamps of acked
// ids alone (other handles may share the queue with theirs), so a later
// handle with a window still refuses an id acked within it, where the
// embedded queue's open without a window forgets every acked id.
func TestDedupStampsOutliveHandleWithoutWindow(t *testing.T) {
	e := newDedupEnv(t, redistest.Start(t).Client())
	q := e.open(time.Hour)
	deliverAck(t, q, "x", "a")
	require.NoError(t, q.Close())
	q = e.open(0)
	deliverAck(t, q, "y", "b")
	require.NoError(t, q.Close())
	q = e.open(time.Hour)
	require.ErrorIs(t, enqueueID(q, "x", "c"), queue.ErrDuplicate)
}

// TestDedupForgetsBoundedPerEnqueue pins a difference from the embedded
// queue: an enqueue forgets at most 128 ids whose window has passed, so
// a later handle with a longer window refuses those not yet forgotten.
func TestDedupForgetsBoundedPerEnqueue(t *testing.T) {
	e := newDedupEnv(t, redistest.Start(t).Client())
	ctx := context.Background()
	q := e.open(time.Hour)
	items := make([]queue.Item, 200)
	for i := range items {
		items[i] = queue.Item{ID: fmt.Sprintf("x%03d", i), Payload: []byte("a")}
	}
	_, err := q.EnqueueBatch(ctx, items)
	require.NoError(t, err)
	ms, err := q.DequeueBatch(ctx, len(items))
	require.NoError(t, err)
	require.Len(t, ms, len(items))
	require.NoError(t, ms.Ack())
	require.NoError(t, q.Close())
	e.clock.Advance(2 * time.Minute)
	q = e.open(time.Minute)
	deliverAck(t, q, "y", "b")
	require.NoError(t, q.Close())
	q = e.open(time.Hour)
	refused := 0
	for _, it := range items {
		if err := enqueueID(q, it.ID, "c"); err != nil {
			require.ErrorIs(t, err, queue.ErrDuplicate)
			refused++
		}
	}
	require.Equal(t, len(items)-128, refused)
}

// TestDedupDeadAndPurged: a dead letter keeps its id for every handle;
// a purge by a handle with a window keeps it refused within that window
// (as an ack does), for handles with a window only; a requeue keeps it
// live.
func TestDedupDeadAndPurged(t *testing.T) {
	e := newDedupEnv(t, redistest.Start(t).Client())
	with, without := e.open(time.Hour), e.open(0)
	require.NoError(t, enqueueID(with, "x", "a"))
	require.NoError(t, with.DeadLetterID(mustDequeue(t, with, "a"), "bad"))
	require.ErrorIs(t, enqueueID(without, "x", "b"), queue.ErrDuplicate, "dead keeps its id")
	require.NoError(t, without.RequeueDead("x"))
	require.ErrorIs(t, enqueueID(without, "x", "b"), queue.ErrDuplicate, "requeued: live")
	require.NoError(t, with.DeadLetterID(mustDequeue(t, with, "a"), "bad"))
	require.NoError(t, with.PurgeDead("x"))
	require.ErrorIs(t, enqueueID(with, "x", "b"), queue.ErrDuplicate, "purged within the window")
	require.NoError(t, enqueueID(without, "x", "c"), "no window: a purged id is free")
	require.NoError(t, without.DeadLetterID(mustDequeue(t, without, "c"), "bad"))
	require.NoError(t, without.PurgeDead("x"))
	require.NoError(t, enqueueID(with, "x", "d"), "purged by a handle without a window: no stamp")
}

// TestDedupBatch: a batch holding an id acked within the window is
// refused whole by a handle with a window and taken by one without; a
// batch repeating an id is refused whole by both.
func TestDedupBatch(t *testing.T) {
	e := newDedupEnv(t, redistest.Start(t).Client())
	ctx := context.Background()
	with, without := e.open(time.Hour), e.open(0)
	deliverAck(t, with, "x", "a")
	batch := []queue.Item{{ID: "z", Payload: []byte("1")}, {ID: "x", Payload: []byte("2")}}
	_, err := with.EnqueueBatch(ctx, batch)
	require.ErrorIs(t, err, queue.ErrDuplicate)
	for _, q := range []*redisq.Queue{with, without} {
		_, err = q.EnqueueBatch(ctx, []queue.Item{{ID: "w", Payload: []byte("1")}, {ID: "w", Payload: []byte("2")}})
		require.ErrorIs(t, err, queue.ErrDuplicate)
	}
	require.EqualValues(t, 0, with.Stats().Ready, "refused batches enqueue nothing")
	_, err = without.EnqueueBatch(ctx, batch)
	require.NoError(t, err)
	require.Equal(t, "z", mustDequeue(t, with, "1"))
	require.Equal(t, "x", mustDequeue(t, with, "2"))
}

// TestDedupWindowUnderMicrosecond: a window that is not a whole number of
// microseconds (the scripts' unit) counts as the next whole one, so the
// handle refuses every id the embedded queue refuses: one acked within
// the window, also when the ack and the enqueue fall in different
// microseconds; once the window has passed by a whole microsecond more,
// the id is free.
func TestDedupWindowUnderMicrosecond(t *testing.T) {
	rdb := redistest.Start(t).Client()
	for _, window := range []time.Duration{500 * time.Nanosecond, 1500 * time.Nanosecond} {
		t.Run(window.String(), func(t *testing.T) {
			e := newDedupEnv(t, rdb)
			q := e.open(window)
			require.NoError(t, enqueueID(q, "x", "a"))
			e.clock.Advance(900 * time.Nanosecond) // the ack late in its microsecond
			require.NoError(t, q.AckID(mustDequeue(t, q, "a")))
			e.clock.Advance(window)
			require.Equal(t, 1, q.Stats().DedupIDs)
			require.ErrorIs(t, enqueueID(q, "x", "b"), queue.ErrDuplicate, "acked a window ago")
			e.clock.Advance(window + 2*time.Microsecond)
			require.NoError(t, enqueueID(q, "x", "c"), "past the window")
		})
	}
}
