package redisq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// shortWait is a handle's Options asking for a replica the server lacks:
// every call that writes then fails with ErrNotDurable, having made its
// change.
func shortWait() redisq.Options {
	return redisq.Options{Replicas: 1, WaitTimeout: 20 * time.Millisecond, ManualRequeue: true, AckTimeout: time.Minute}
}

// pulledShort opens the sorted queue name with o over rdb, publishes one
// value (ErrNotDurable: published) and pulls its batch with TryPull.
func pulledShort(t *testing.T, rdb redis.UniversalClient, name string, o redisq.Options) (*redisq.Sorted[int64], *queue.Batch[int64]) {
	t.Helper()
	ctx := context.Background()
	s, err := redisq.OpenSorted[int64](ctx, rdb, name, &redisq.SortedOptions{Options: o})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.ErrorIs(t, s.Publish(ctx, 1, "k", []byte("v")), redisq.ErrNotDurable)
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	return s, bs[0]
}

// TestDequeueNotDurableDelivers: a dequeue whose WAIT falls short leased
// its messages on the server (ErrNotDurable: the change was made), so it
// must hand them to the caller; else each one stays leased, unseen, until
// its deadline, and at MaxDeliveries goes dead never having been
// delivered.
func TestDequeueNotDurableDelivers(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	o := shortWait()
	o.MaxDeliveries = 1
	q, err := redisq.Open(ctx, srv.Client(), "nd-deq", &o)
	require.NoError(t, err)
	defer q.Close()
	for _, p := range []string{"lone", "try", "batch1", "batch2", "left"} {
		_, err = q.Enqueue(ctx, []byte(p))
		require.ErrorIs(t, err, redisq.ErrNotDurable)
	}
	got := map[string]bool{}
	m, err := q.Dequeue(ctx)
	require.NoError(t, err, "Dequeue: the message it leased must reach the caller")
	got[string(m.Payload)] = true
	m, err = q.TryDequeue()
	require.NoError(t, err, "TryDequeue: the message it leased must reach the caller")
	got[string(m.Payload)] = true
	ms, err := q.DequeueBatch(ctx, 2)
	require.NoError(t, err, "DequeueBatch: the messages it leased must reach the caller")
	for _, m := range ms {
		got[string(m.Payload)] = true
	}
	require.Len(t, got, 4)
	st, err := q.StatsContext(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4, st.InFlight)
	require.EqualValues(t, 1, st.Ready)
	require.Zero(t, st.Dead)
}

// TestPullNotDurableDelivers: as a dequeue, a pull whose WAIT falls short
// leased its batches; they must reach the caller.
func TestPullNotDurableDelivers(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := redisq.OpenSorted[int64](ctx, srv.Client(), "nd-pull", &redisq.SortedOptions{Options: shortWait()})
	require.NoError(t, err)
	defer s.Close()
	for i, k := range []string{"a", "b"} {
		require.ErrorIs(t, s.Publish(ctx, int64(i), k, []byte(k)), redisq.ErrNotDurable)
	}
	bs, err := s.Pull(ctx, 1)
	require.NoError(t, err, "Pull: the batch it leased must reach the caller")
	require.Len(t, bs, 1)
	require.Equal(t, "a", bs[0].Key)
	bs, err = s.TryPull(1)
	require.NoError(t, err, "TryPull: the batch it leased must reach the caller")
	require.Len(t, bs, 1)
	require.Equal(t, "b", bs[0].Key)
}

// TestSettleNotDurableStaleReceipt: ErrNotDurable says the change was
// made, so a settle that made none (a stale receipt, an id not in
// flight) must say so whatever the WAIT after it.
func TestSettleNotDurableStaleReceipt(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	q, err := redisq.Open(ctx, srv.Client(), "nd-settle", &redisq.Options{ManualRequeue: true, AckTimeout: time.Minute})
	require.NoError(t, err)
	defer q.Close()
	o := shortWait()
	short, err := redisq.Open(ctx, srv.Client(), "nd-settle", &o)
	require.NoError(t, err)
	defer short.Close()
	_, err = q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("a")}, {ID: "given", Payload: []byte("b")}})
	require.NoError(t, err)
	ms, err := q.DequeueBatch(ctx, 2)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	for _, m := range ms {
		require.NoError(t, q.Nack(m.Receipt, 0))
	}
	for _, m := range ms {
		stale := m.Receipt
		require.ErrorIs(t, short.Ack(stale), queue.ErrLeaseLost, "ack of a stale receipt of %q", m.Payload)
		require.ErrorIs(t, short.Nack(stale, 0), queue.ErrLeaseLost, "nack of a stale receipt of %q", m.Payload)
		require.ErrorIs(t, short.Extend(stale, time.Minute), queue.ErrLeaseLost, "extend of a stale receipt of %q", m.Payload)
		require.ErrorIs(t, short.DeadLetter(stale, "x"), queue.ErrLeaseLost, "dead letter of a stale receipt of %q", m.Payload)
	}
	require.ErrorIs(t, short.AckID("given"), queue.ErrNotFound, "ack of an id not in flight")

	_, b := pulledShort(t, srv.Client(), "nd-settle-sorted", shortWait())
	require.ErrorIs(t, b.Ack(), redisq.ErrNotDurable, "the first ack is made")
	require.ErrorIs(t, b.Ack(), queue.ErrLeaseLost, "a second ack of the batch")
}

// TestEnqueueNotDurableDuplicate: concurrent Enqueues go to the server in
// one call; one refused as a duplicate must be told ErrDuplicate, not
// ErrNotDurable (enqueued), when the WAIT after the call falls short.
func TestEnqueueNotDurableDuplicate(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	o := shortWait()
	q, err := redisq.Open(ctx, srv.Client(), "nd-enq", &o)
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("a"), queue.WithID("taken"))
	require.ErrorIs(t, err, redisq.ErrNotDurable)
	// Many at once, so that the handle gathers some into one call.
	const n = 16
	errs := make(chan error, n)
	for i := range n {
		id := "taken"
		if i%2 == 1 {
			id = "fresh" + string(rune('a'+i))
		}
		go func() {
			_, err := q.Enqueue(ctx, []byte("b"), queue.WithID(id))
			if id == "taken" && !errors.Is(err, queue.ErrDuplicate) {
				errs <- err
				return
			}
			errs <- nil
		}()
	}
	for range n {
		require.NoError(t, <-errs, "an enqueue of a taken id was not told ErrDuplicate")
	}
}

// TestDeadOpsNotDurable: a change of the dead set whose WAIT falls short
// reports what it did: the count of what it requeued or purged, and
// ErrNotFound for a letter that is not there.
func TestDeadOpsNotDurable(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	o := shortWait()
	q, err := redisq.Open(ctx, srv.Client(), "nd-dead", &o)
	require.NoError(t, err)
	defer q.Close()
	_, err = q.EnqueueBatch(ctx, []queue.Item{{ID: "a", Payload: []byte("a")}, {ID: "b", Payload: []byte("b")}})
	require.ErrorIs(t, err, redisq.ErrNotDurable)
	ms, err := q.DequeueBatch(ctx, 2)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	for _, m := range ms {
		require.ErrorIs(t, m.DeadLetter("x"), redisq.ErrNotDurable)
	}
	require.ErrorIs(t, q.RequeueDead("nobody"), queue.ErrNotFound, "requeue of no dead letter")
	require.ErrorIs(t, q.PurgeDead("nobody"), queue.ErrNotFound, "purge of no dead letter")
	n, err := q.RequeueAllDead()
	require.ErrorIs(t, err, redisq.ErrNotDurable)
	require.Equal(t, 2, n, "RequeueAllDead's count of the letters it requeued")

	s, b := pulledShort(t, srv.Client(), "nd-dead-sorted", shortWait())
	require.ErrorIs(t, b.DeadLetter("x"), redisq.ErrNotDurable)
	require.ErrorIs(t, s.RequeueDead(99), queue.ErrNotFound, "requeue of no dead value")
	n, err = s.PurgeAllDead()
	require.ErrorIs(t, err, redisq.ErrNotDurable)
	require.Equal(t, 1, n, "PurgeAllDead's count of the values it purged")
}

// TestRequeueExpiredNotDurable: a housekeeping call whose WAIT falls
// short ended its leases: RequeueExpired counts them, as without
// Replicas.
func TestRequeueExpiredNotDurable(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	clock := queuetest.NewClock()
	o := shortWait()
	o.Clock = noTimers{clock}
	q, err := redisq.Open(ctx, srv.Client(), "nd-expire", &o)
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("a"))
	require.ErrorIs(t, err, redisq.ErrNotDurable)
	_, err = q.TryDequeue()
	require.NoError(t, err)
	clock.Advance(2 * time.Minute)
	n, err := q.RequeueExpired()
	require.ErrorIs(t, err, redisq.ErrNotDurable)
	require.Equal(t, 1, n, "RequeueExpired's count of the leases it ended")

	s, _ := pulledShort(t, srv.Client(), "nd-expire-sorted", o)
	clock.Advance(2 * time.Minute)
	n, err = s.RequeueExpired()
	require.ErrorIs(t, err, redisq.ErrNotDurable)
	require.Equal(t, 1, n, "RequeueExpired's count of the batches it ended")
}

// TestEnqueueNotDurableReturnsIDs: an enqueue whose WAIT falls short
// enqueued its messages (ErrNotDurable): it returns their ids with the
// error, so that a producer holds the generated ones.
func TestEnqueueNotDurableReturnsIDs(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	o := shortWait()
	q, err := redisq.Open(ctx, srv.Client(), "nd-ids", &o)
	require.NoError(t, err)
	defer q.Close()
	id, err := q.Enqueue(ctx, []byte("a"))
	require.ErrorIs(t, err, redisq.ErrNotDurable)
	require.NotEmpty(t, id, "Enqueue's generated id")
	ids, err := q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("b")}, {ID: "c", Payload: []byte("c")}})
	require.ErrorIs(t, err, redisq.ErrNotDurable)
	require.Len(t, ids, 2, "EnqueueBatch's ids")
	ms, err := q.DequeueBatch(ctx, 3)
	require.NoError(t, err)
	require.Len(t, ms, 3)
	require.Equal(t, []string{id, ids[0], ids[1]}, []string{ms[0].ID, ms[1].ID, ms[2].ID})
}

// TestEmptyDequeueNotDurable: a dequeue or pull that finds nothing leased
// nothing, whatever the WAIT after it: a try reports ErrEmpty and a
// blocking call waits, instead of failing with ErrNotDurable at every
// WaitTimeout (a consumer loop would spin).
func TestEmptyDequeueNotDurable(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	o := shortWait()
	q, err := redisq.Open(ctx, srv.Client(), "nd-empty", &o)
	require.NoError(t, err)
	defer q.Close()
	_, err = q.TryDequeue()
	require.ErrorIs(t, err, queue.ErrEmpty, "TryDequeue of an empty queue")
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = q.Dequeue(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "Dequeue of an empty queue waits")

	s, err := redisq.OpenSorted[int64](ctx, srv.Client(), "nd-empty-sorted", &redisq.SortedOptions{Options: shortWait()})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.TryPull(1)
	require.ErrorIs(t, err, queue.ErrEmpty, "TryPull of an empty queue")
	short2, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	_, err = s.Pull(short2, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded, "Pull of an empty queue waits")
}

// TestWaitRefusedDelivers: a WAIT that fails outright (here refused by
// the ACL) comes after the call's change as a WAIT that falls short
// does: ErrNotDurable, the change made. A dequeue or pull must still
// hand over what it leased, and a stale receipt must still be told
// ErrLeaseLost.
func TestWaitRefusedDelivers(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	admin := srv.Client()
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "nowait", "on", ">pw", "~*", "&*", "+@all", "-wait").Err())
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, Username: "nowait", Password: "pw"})
	defer rdb.Close()
	o := shortWait()
	q, err := redisq.Open(ctx, rdb, "nd-refused", &o)
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("a"))
	require.ErrorIs(t, err, redisq.ErrNotDurable)
	m, err := q.Dequeue(ctx)
	require.NoError(t, err, "Dequeue: the message it leased must reach the caller")
	require.Equal(t, "a", string(m.Payload))
	require.ErrorIs(t, q.Nack(m.Receipt, 0), redisq.ErrNotDurable)
	require.ErrorIs(t, q.Ack(m.Receipt), queue.ErrLeaseLost, "ack of a stale receipt")

	s, err := redisq.OpenSorted[int64](ctx, rdb, "nd-refused-sorted", &redisq.SortedOptions{Options: shortWait()})
	require.NoError(t, err)
	defer s.Close()
	require.ErrorIs(t, s.Publish(ctx, 1, "k", []byte("v")), redisq.ErrNotDurable)
	bs, err := s.Pull(ctx, 1)
	require.NoError(t, err, "Pull: the batch it leased must reach the caller")
	require.Len(t, bs, 1)
}
