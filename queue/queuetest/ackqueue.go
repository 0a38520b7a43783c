package queuetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// Options are what a subtest asks of the queue it opens.
type Options struct {
	AckTimeout    time.Duration // the lease length
	MaxDeliveries int           // as queue.Options.MaxDeliveries
	DedupWindow   time.Duration // as queue.Options.DedupWindow
	Clock         *Clock        // the engine takes every time from it
}

// Engine is the engine under test.
type Engine struct {
	// Open returns a new, empty ack queue configured by o, with automatic
	// requeueing of expired leases off, and a function that returns
	// another handle on the same queue. An engine that allows one handle
	// at a time closes the first one in that function; the suite uses
	// only the handle returned last. The suite closes what it uses; Open
	// registers any other cleanup with t.Cleanup.
	Open func(t *testing.T, o Options) (q queue.AckQueue, another func() queue.AckQueue)
}

// TestAckQueue runs every subtest of the ack queue against e.
func TestAckQueue(t *testing.T, e Engine) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, e Engine)
	}{
		{"RoundTrip", testRoundTrip},
		{"FIFO", testFIFO},
		{"DequeueBatch", testDequeueBatch},
		{"DequeueBatchEverything", testDequeueBatchAll},
		{"AckTwice", testAckTwice},
		{"StaleReceiptAfterRedelivery", testStaleReceipt},
		{"LateAckBeforeExpiry", testLateAck},
		{"ReceiptAcrossHandles", testReceiptAcrossHandles},
		{"ReadyAgainFirst", testReadyAgainFirst},
		{"NackDelay", testNackDelay},
		{"EnqueueDelay", testEnqueueDelay},
		{"Extend", testExtend},
		{"MaxDeliveries", testMaxDeliveries},
		{"DeadLetterSet", testDeadLetterSet},
		{"DeadLettersAll", testDeadLettersAll},
		{"DeadLetterEmptyID", testDeadLetterEmptyID},
		{"ByID", testByID},
		{"Dedup", testDedup},
		{"DedupWindow", testDedupWindow},
		{"InvalidArguments", testInvalid},
		{"BlockingWakes", testBlockingWakes},
		{"BlockingWakesOnDueDelay", testBlockingDueDelay},
		{"CancelAndClose", testCancelAndClose},
		{"CompetingConsumers", testCompeting},
		{"Stats", testStats},
		{"StatsAt", testStatsAt},
		{"FarFuture", testFarFuture},
		{"FineTimes", testFineTimes},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, e) })
	}
}

// env is one subtest's queue and clock.
type env struct {
	t     *testing.T
	q     queue.AckQueue
	clock *Clock
	more  func() queue.AckQueue
}

func open(t *testing.T, e Engine, o Options) *env {
	t.Helper()
	if o.AckTimeout == 0 {
		o.AckTimeout = 10 * time.Second
	}
	if o.MaxDeliveries == 0 {
		o.MaxDeliveries = -1
	}
	o.Clock = NewClock()
	q, more := e.Open(t, o)
	v := &env{t: t, q: q, clock: o.Clock, more: more}
	t.Cleanup(func() { _ = v.q.Close() })
	return v
}

func (v *env) enqueue(payload string, opts ...queue.EnqueueOption) string {
	v.t.Helper()
	id, err := v.q.Enqueue(context.Background(), []byte(payload), opts...)
	require.NoError(v.t, err)
	return id
}

func (v *env) next() *queue.Message {
	v.t.Helper()
	m, err := v.q.TryDequeue()
	require.NoError(v.t, err)
	return m
}

func (v *env) empty() {
	v.t.Helper()
	_, err := v.q.TryDequeue()
	require.ErrorIs(v.t, err, queue.ErrEmpty)
}

func (v *env) requeueExpired(want int) {
	v.t.Helper()
	n, err := v.q.RequeueExpired()
	require.NoError(v.t, err)
	require.Equal(v.t, want, n, "leases ended by RequeueExpired")
}

func testRoundTrip(t *testing.T, e Engine) {
	v := open(t, e, Options{})
	at := v.clock.Now()
	h := map[string]string{"k": "v", "trace": "abc"}
	id := v.enqueue("hello", queue.WithHeaders(h))
	require.NotEmpty(t, id)
	own := v.enqueue("mine", queue.WithID("order-1"))
	require.Equal(t, "order-1", own)
	v.clock.Advance(time.Second)
	m := v.next()
	require.Equal(t, id, m.ID)
	require.Equal(t, []byte("hello"), m.Payload)
	require.Equal(t, h, m.Headers)
	require.True(t, m.EnqueuedAt.Equal(at), "EnqueuedAt %v, want %v", m.EnqueuedAt, at)
	require.True(t, m.DeliveredAt.Equal(at.Add(time.Second)), "DeliveredAt %v", m.DeliveredAt)
	require.Equal(t, 1, m.Deliveries)
	require.NotZero(t, m.Receipt.Seq)
	require.NotZero(t, m.Receipt.Lease)
	r, err := queue.ParseReceipt(m.Receipt.String())
	require.NoError(t, err)
	require.Equal(t, m.Receipt, r)
	require.NoError(t, m.Ack())
	m = v.next()
	require.Equal(t, "order-1", m.ID)
	require.Nil(t, m.Headers)
	require.NoError(t, m.Ack())
	v.empty()
}

func testFIFO(t *testing.T, e Engine) {
	v := open(t, e, Options{})
	for i := range 20 {
		v.enqueue(fmt.Sprint("m", i))
	}
	for i := range 20 {
		m := v.next()
		require.Equal(t, fmt.Sprint("m", i), string(m.Payload))
		require.NoError(t, m.Ack())
	}
	v.empty()
}

func testDequeueBatch(t *testing.T, e Engine) {
	v := open(t, e, Options{})
	ctx := context.Background()
	for i := range 5 {
		v.enqueue(fmt.Sprint(i))
	}
	ms, err := v.q.DequeueBatch(ctx, 3)
	require.NoError(t, err)
	require.Len(t, ms, 3)
	ms2, err := v.q.DequeueBatch(ctx, 10)
	require.NoError(t, err)
	require.Len(t, ms2, 2, "a batch takes what is ready, up to max")
	for i, m := range append(ms, ms2...) {
		require.Equal(t, fmt.Sprint(i), string(m.Payload))
		require.NoError(t, m.Ack())
	}
	_, err = v.q.DequeueBatch(ctx, 0)
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
}

// testDequeueBatchAll: a max of math.MaxInt means "everything ready", as
// a Pull's does: it takes every ready message, in order, more than one
// call to a server leases.
func testDequeueBatchAll(t *testing.T, e Engine) {
	v := open(t, e, Options{})
	ctx := context.Background()
	items := make([]queue.Item, 1234)
	for i := range items {
		items[i].Payload = []byte(fmt.Sprint(i))
	}
	_, err := v.q.EnqueueBatch(ctx, items)
	require.NoError(t, err)
	ms, err := v.q.DequeueBatch(ctx, math.MaxInt)
	require.NoError(t, err)
	require.Len(t, ms, len(items))
	for i, m := range ms {
		require.Equal(t, fmt.Sprint(i), string(m.Payload))
	}
	require.NoError(t, ms.Ack())
	v.empty()
}

func testAckTwice(t *testing.T, e Engine) {
	v := open(t, e, Options{})
	v.enqueue("a")
	m := v.next()
	require.NoError(t, m.Ack())
	require.ErrorIs(t, m.Ack(), queue.ErrLeaseLost)
	require.ErrorIs(t, m.Nack(0), queue.ErrLeaseLost)
	require.ErrorIs(t, m.Extend(time.Second), queue.ErrLeaseLost)
	require.ErrorIs(t, m.DeadLetter("x"), queue.ErrLeaseLost)
	require.ErrorIs(t, v.q.Ack(queue.Receipt{Seq: 999, Lease: 1}), queue.ErrLeaseLost)
	v.empty()
}

func testStaleReceipt(t *testing.T, e Engine) {
	v := open(t, e, Options{AckTimeout: 10 * time.Second})
	v.enqueue("a")
	first := v.next()
	v.clock.Advance(11 * time.Second)
	v.requeueExpired(1)
	second := v.next()
	require.Equal(t, first.ID, second.ID)
	require.Equal(t, 2, second.Deliveries)
	require.NotEqual(t, first.Receipt, second.Receipt)
	require.ErrorIs(t, first.Ack(), queue.ErrLeaseLost, "a stale receipt must not ack the new delivery")
	require.ErrorIs(t, first.Extend(time.Hour), queue.ErrLeaseLost)
	require.NoError(t, second.Ack())
	v.empty()
}

func testLateAck(t *testing.T, e Engine) {
	v := open(t, e, Options{AckTimeout: 10 * time.Second})
	v.enqueue("a")
	m := v.next()
	v.clock.Advance(11 * time.Second)
	require.ErrorIs(t, m.Ack(), queue.ErrLeaseLost, "past its deadline a receipt is lost at once, before any requeue")
	v.requeueExpired(1)
	again := v.next()
	require.Equal(t, 2, again.Deliveries)
	require.NoError(t, again.Ack())
	v.empty()
}

func testReceiptAcrossHandles(t *testing.T, e Engine) {
	v := open(t, e, Options{AckTimeout: time.Minute})
	v.enqueue("a")
	v.enqueue("b")
	ma, mb := v.next(), v.next()
	ra, rb := ma.Receipt.String(), mb.Receipt.String()
	other := v.more()
	v.q = other
	r, err := queue.ParseReceipt(ra)
	require.NoError(t, err)
	require.NoError(t, other.Ack(r), "a receipt acks through another handle")
	r, err = queue.ParseReceipt(rb)
	require.NoError(t, err)
	require.NoError(t, other.Nack(r, 0))
	m := v.next()
	require.Equal(t, "b", string(m.Payload))
	require.Equal(t, 2, m.Deliveries)
	require.NoError(t, m.Ack())
	v.empty()
}

func testReadyAgainFirst(t *testing.T, e Engine) {
	v := open(t, e, Options{})
	for _, p := range []string{"a", "b", "c", "d"} {
		v.enqueue(p)
	}
	a, b := v.next(), v.next()
	require.NoError(t, b.Nack(0))
	require.NoError(t, a.Nack(0))
	// Ready again before never-delivered, lowest sequence (oldest) first.
	for _, want := range []struct {
		p string
		n int
	}{{"a", 2}, {"b", 2}, {"c", 1}, {"d", 1}} {
		m := v.next()
		require.Equal(t, want.p, string(m.Payload))
		require.Equal(t, want.n, m.Deliveries)
		require.NoError(t, m.Ack())
	}
	v.empty()
}

func testNackDelay(t *testing.T, e Engine) {
	v := open(t, e, Options{AckTimeout: time.Hour})
	v.enqueue("a")
	v.enqueue("b")
	m := v.next()
	require.NoError(t, m.Nack(time.Minute))
	require.Equal(t, int64(1), v.q.Stats().Delayed)
	b := v.next()
	require.Equal(t, "b", string(b.Payload))
	v.empty()
	v.clock.Advance(59 * time.Second)
	v.empty()
	v.clock.Advance(time.Second)
	m = v.next()
	require.Equal(t, "a", string(m.Payload))
	require.Equal(t, 2, m.Deliveries)
	require.NoError(t, m.Ack())
	require.NoError(t, b.Ack())
}

func testEnqueueDelay(t *testing.T, e Engine) {
	v := open(t, e, Options{})
	v.enqueue("later", queue.WithDelay(time.Minute))
	v.enqueue("at", queue.WithDeliverAt(v.clock.Now().Add(30*time.Second)))
	v.enqueue("now")
	require.Equal(t, int64(2), v.q.Stats().Delayed)
	require.Equal(t, "now", string(v.next().Payload))
	v.empty()
	v.clock.Advance(30 * time.Second)
	require.Equal(t, "at", string(v.next().Payload))
	v.empty()
	v.clock.Advance(30 * time.Second)
	m := v.next()
	require.Equal(t, "later", string(m.Payload))
	require.Equal(t, 1, m.Deliveries)
}

func testExtend(t *testing.T, e Engine) {
	v := open(t, e, Options{AckTimeout: 10 * time.Second})
	v.enqueue("long")
	v.enqueue("short")
	long, short := v.next(), v.next()
	require.NoError(t, long.Extend(time.Hour), "an extension may be longer than AckTimeout")
	require.NoError(t, short.Extend(time.Second), "or shorter")
	v.clock.Advance(2 * time.Second)
	v.requeueExpired(1)
	v.clock.Advance(30 * time.Minute)
	v.requeueExpired(0)
	require.NoError(t, long.Ack())
	m := v.next()
	require.Equal(t, "short", string(m.Payload))
	require.NoError(t, m.Ack())
}

func testMaxDeliveries(t *testing.T, e Engine) {
	v := open(t, e, Options{MaxDeliveries: 2, AckTimeout: 10 * time.Second})
	v.enqueue("nacked", queue.WithID("n"))
	v.enqueue("expired", queue.WithID("x"))
	m := v.next()
	require.NoError(t, m.Nack(0))
	m = v.next()
	require.Equal(t, "nacked", string(m.Payload))
	require.Equal(t, 2, m.Deliveries)
	require.NoError(t, m.Nack(0), "the nack that reaches MaxDeliveries succeeds")
	for range 2 {
		m = v.next()
		require.Equal(t, "expired", string(m.Payload))
		v.clock.Advance(11 * time.Second)
		v.requeueExpired(1)
	}
	v.empty()
	dl, err := v.q.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, dl, 2)
	require.Equal(t, "n", dl[0].ID)
	require.Equal(t, "2 deliveries; last: nacked", dl[0].Reason)
	require.Equal(t, 2, dl[0].Deliveries)
	require.Equal(t, []byte("nacked"), dl[0].Payload)
	require.Equal(t, "x", dl[1].ID)
	require.Equal(t, "2 deliveries; last: ack timeout", dl[1].Reason)
	require.Less(t, dl[0].Seq, dl[1].Seq)
	s := v.q.Stats()
	require.Equal(t, int64(2), s.Dead)
	require.Equal(t, uint64(2), s.DeadLettered)
}

func testDeadLetterSet(t *testing.T, e Engine) {
	v := open(t, e, Options{})
	at := v.clock.Now()
	h := map[string]string{"h": "1"}
	for i := range 4 {
		v.enqueue(fmt.Sprint("p", i), queue.WithID(fmt.Sprint("d", i)), queue.WithHeaders(h))
	}
	for range 4 {
		m := v.next()
		require.NoError(t, m.DeadLetter("bad "+m.ID))
	}
	v.empty()
	all, err := v.q.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, all, 4)
	for i, d := range all {
		require.Equal(t, fmt.Sprint("d", i), d.ID)
		require.Equal(t, "bad "+d.ID, d.Reason)
		require.Equal(t, 1, d.Deliveries)
		require.Equal(t, []byte(fmt.Sprint("p", i)), d.Payload)
		require.Equal(t, h, d.Headers)
		require.True(t, d.EnqueuedAt.Equal(at))
	}
	page, err := v.q.DeadLetters(all[1].Seq, 2)
	require.NoError(t, err)
	require.Equal(t, []string{"d1", "d2"}, []string{page[0].ID, page[1].ID})

	require.NoError(t, v.q.RequeueDead("d0"))
	m := v.next()
	require.Equal(t, "d0", m.ID)
	require.Equal(t, 1, m.Deliveries, "requeue resets the delivery count")
	require.NoError(t, m.Ack())
	require.NoError(t, v.q.PurgeDead("d1"))
	require.ErrorIs(t, v.q.PurgeDead("d1"), queue.ErrNotFound)
	require.ErrorIs(t, v.q.RequeueDead("nope"), queue.ErrNotFound)
	n, err := v.q.RequeueAllDead()
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for _, want := range []string{"d2", "d3"} {
		m := v.next()
		require.Equal(t, want, m.ID)
		require.NoError(t, m.DeadLetter("again"))
	}
	n, err = v.q.PurgeAllDead()
	require.NoError(t, err)
	require.Equal(t, 2, n)
	dl, err := v.q.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Empty(t, dl)
	require.Equal(t, int64(0), v.q.Stats().Dead)
}

// testDeadLettersAll: DeadLetters with a max of 0 or less, or of
// math.MaxInt, lists every dead letter from its seq on, in seq order,
// more than one call to a server lists.
func testDeadLettersAll(t *testing.T, e Engine) {
	v := open(t, e, Options{MaxDeliveries: 1})
	ctx := context.Background()
	items := make([]queue.Item, 1005)
	for i := range items {
		items[i].Payload = []byte(fmt.Sprint(i))
	}
	_, err := v.q.EnqueueBatch(ctx, items)
	require.NoError(t, err)
	ms, err := v.q.DequeueBatch(ctx, len(items))
	require.NoError(t, err)
	require.Len(t, ms, len(items))
	require.NoError(t, ms.Nack(0), "at MaxDeliveries: dead")
	for _, max := range []int{0, -1, math.MaxInt} {
		all, err := v.q.DeadLetters(0, max)
		require.NoError(t, err, "max %d", max)
		require.Len(t, all, len(items), "max %d", max)
		for i, d := range all {
			require.Equal(t, fmt.Sprint(i), string(d.Payload), "max %d", max)
		}
		tail, err := v.q.DeadLetters(all[1000].Seq, max)
		require.NoError(t, err, "max %d", max)
		require.Len(t, tail, 5, "max %d, from the 1001st", max)
		require.Equal(t, all[1000:], tail)
	}
}

// testDeadLetterEmptyID: no message has the empty id (an enqueue without
// one, or WithID(""), gets a generated id), so RequeueDead and PurgeDead
// with it find no dead letter (ErrNotFound) and change none; nor do the
// calls by id of a delivery.
func testDeadLetterEmptyID(t *testing.T, e Engine) {
	v := open(t, e, Options{})
	v.enqueue("a")
	v.enqueue("b", queue.WithID(""))
	for range 2 {
		m := v.next()
		require.NotEmpty(t, m.ID)
		require.NoError(t, m.DeadLetter("why"))
	}
	require.ErrorIs(t, v.q.PurgeDead(""), queue.ErrNotFound)
	require.ErrorIs(t, v.q.RequeueDead(""), queue.ErrNotFound)
	dl, err := v.q.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, dl, 2, "no dead letter purged or requeued")
	require.Equal(t, []byte("a"), dl[0].Payload)
	require.Equal(t, []byte("b"), dl[1].Payload)
	v.empty()
	v.enqueue("c")
	m := v.next()
	require.ErrorIs(t, v.q.AckID(""), queue.ErrNotFound)
	require.ErrorIs(t, v.q.NackID("", 0), queue.ErrNotFound)
	require.ErrorIs(t, v.q.ExtendID("", time.Minute), queue.ErrNotFound)
	require.ErrorIs(t, v.q.DeadLetterID("", "why"), queue.ErrNotFound)
	require.NoError(t, m.Ack(), "still leased to its delivery")
}

func testByID(t *testing.T, e Engine) {
	v := open(t, e, Options{AckTimeout: 10 * time.Second})
	for _, id := range []string{"a", "n", "x", "d"} {
		v.enqueue(id, queue.WithID(id))
	}
	require.ErrorIs(t, v.q.AckID("a"), queue.ErrNotFound, "not in flight yet")
	for range 4 {
		v.next()
	}
	require.NoError(t, v.q.AckID("a"))
	require.ErrorIs(t, v.q.AckID("a"), queue.ErrNotFound)
	require.NoError(t, v.q.NackID("n", 0))
	require.NoError(t, v.q.ExtendID("x", time.Hour))
	require.NoError(t, v.q.DeadLetterID("d", "by id"))
	require.ErrorIs(t, v.q.NackID("zz", 0), queue.ErrNotFound)
	v.clock.Advance(time.Minute)
	v.requeueExpired(0)
	m := v.next()
	require.Equal(t, "n", m.ID)
	require.NoError(t, m.Ack())
	require.NoError(t, v.q.AckID("x"))
	dl, err := v.q.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, dl, 1)
	require.Equal(t, "by id", dl[0].Reason)
	v.empty()
}

func testDedup(t *testing.T, e Engine) {
	v := open(t, e, Options{})
	ctx := context.Background()
	v.enqueue("a", queue.WithID("k"))
	_, err := v.q.Enqueue(ctx, []byte("again"), queue.WithID("k"))
	require.ErrorIs(t, err, queue.ErrDuplicate, "a live id refuses duplicates")
	_, err = v.q.EnqueueBatch(ctx, []queue.Item{{ID: "fresh", Payload: []byte("1")}, {ID: "k", Payload: []byte("2")}})
	require.ErrorIs(t, err, queue.ErrDuplicate)
	_, err = v.q.EnqueueBatch(ctx, []queue.Item{{ID: "same", Payload: []byte("1")}, {ID: "same", Payload: []byte("2")}})
	require.ErrorIs(t, err, queue.ErrDuplicate, "a batch may not repeat an id")
	ids, err := v.q.EnqueueBatch(ctx, []queue.Item{{ID: "fresh", Payload: []byte("3")}, {Payload: []byte("4")}})
	require.NoError(t, err, "a refused batch enqueued nothing, so its ids are free")
	require.Equal(t, "fresh", ids[0])
	m := v.next()
	require.Equal(t, "k", m.ID)
	require.NoError(t, m.DeadLetter("dead keeps its id"))
	_, err = v.q.Enqueue(ctx, []byte("x"), queue.WithID("k"))
	require.ErrorIs(t, err, queue.ErrDuplicate, "a dead letter keeps its id until purged")
	require.NoError(t, v.q.PurgeDead("k"))
	v.enqueue("b", queue.WithID("k"))
	for _, want := range []string{"3", "4", "b"} {
		m := v.next()
		require.Equal(t, want, string(m.Payload))
		require.NoError(t, m.Ack())
	}
	v.enqueue("c", queue.WithID("k"))
	require.Equal(t, "c", string(v.next().Payload), "acked with no window, the id is free")
	v.empty()
}

func testDedupWindow(t *testing.T, e Engine) {
	v := open(t, e, Options{DedupWindow: time.Minute})
	ctx := context.Background()
	v.enqueue("a", queue.WithID("k"))
	require.NoError(t, v.next().Ack())
	require.Equal(t, 1, v.q.Stats().DedupIDs)
	v.clock.Advance(59 * time.Second)
	_, err := v.q.Enqueue(ctx, []byte("b"), queue.WithID("k"))
	require.ErrorIs(t, err, queue.ErrDuplicate, "acked within the window")
	v.clock.Advance(time.Second)
	_, err = v.q.Enqueue(ctx, []byte("b"), queue.WithID("k"))
	require.ErrorIs(t, err, queue.ErrDuplicate, "acked exactly the window ago")
	v.clock.Advance(time.Second)
	v.enqueue("c", queue.WithID("k"))
	m := v.next()
	require.Equal(t, "c", string(m.Payload))
	require.NoError(t, m.Ack())
}

func testInvalid(t *testing.T, e Engine) {
	v := open(t, e, Options{})
	v.enqueue("a")
	m := v.next()
	require.ErrorIs(t, m.Nack(-time.Second), queue.ErrInvalidOptions)
	require.ErrorIs(t, m.Extend(0), queue.ErrInvalidOptions)
	_, err := v.q.Enqueue(context.Background(), make([]byte, 4<<20+1))
	require.ErrorIs(t, err, queue.ErrTooLarge)
	_, err = queue.ParseReceipt("12")
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
	require.NoError(t, m.Ack())
}

func testBlockingWakes(t *testing.T, e Engine) {
	v := open(t, e, Options{})
	got := make(chan *queue.Message, 1)
	errc := make(chan error, 1)
	go func() {
		m, err := v.q.Dequeue(context.Background())
		if err != nil {
			errc <- err
			return
		}
		got <- m
	}()
	time.Sleep(50 * time.Millisecond) // let it block; a wake-up may come at any time
	v.enqueue("wake")
	m := receive(t, got, errc)
	require.Equal(t, "wake", string(m.Payload))
	go func() {
		m, err := v.q.Dequeue(context.Background())
		if err != nil {
			errc <- err
			return
		}
		got <- m
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, m.Nack(0), "a nack wakes a blocked consumer")
	m = receive(t, got, errc)
	require.Equal(t, 2, m.Deliveries)
	require.NoError(t, m.Ack())
}

func receive(t *testing.T, got <-chan *queue.Message, errc <-chan error) *queue.Message {
	t.Helper()
	select {
	case m := <-got:
		return m
	case err := <-errc:
		t.Fatalf("Dequeue: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("blocked Dequeue did not wake")
	}
	return nil
}

func testBlockingDueDelay(t *testing.T, e Engine) {
	v := open(t, e, Options{})
	v.enqueue("later", queue.WithDelay(time.Minute))
	got := make(chan *queue.Message, 1)
	errc := make(chan error, 1)
	go func() {
		m, err := v.q.Dequeue(context.Background())
		if err != nil {
			errc <- err
			return
		}
		got <- m
	}()
	select {
	case <-got:
		t.Fatal("delivered before its delay")
	case <-time.After(50 * time.Millisecond):
	}
	// The consumer arms a timer on the manual clock; advancing in steps
	// fires it whenever it was armed.
	deadline := time.Now().Add(10 * time.Second)
	for {
		v.clock.Advance(10 * time.Second)
		select {
		case m := <-got:
			require.Equal(t, "later", string(m.Payload))
			require.False(t, v.clock.Now().Before(m.EnqueuedAt.Add(time.Minute)))
			return
		case err := <-errc:
			t.Fatalf("Dequeue: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "blocked Dequeue did not wake at the due time")
	}
}

func testCancelAndClose(t *testing.T, e Engine) {
	v := open(t, e, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 2)
	go func() {
		_, err := v.q.Dequeue(ctx)
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(2 * time.Second):
		t.Fatal("Dequeue did not return after its context was cancelled")
	}
	go func() {
		_, err := v.q.DequeueBatch(context.Background(), 5)
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, v.q.Close())
	select {
	case err := <-errc:
		require.ErrorIs(t, err, queue.ErrClosed)
	case <-time.After(2 * time.Second):
		t.Fatal("Dequeue did not return after Close")
	}
	_, err := v.q.Enqueue(context.Background(), []byte("x"))
	require.ErrorIs(t, err, queue.ErrClosed)
	_, err = v.q.TryDequeue()
	require.ErrorIs(t, err, queue.ErrClosed)
	require.ErrorIs(t, v.q.Ack(queue.Receipt{Seq: 1, Lease: 1}), queue.ErrClosed)
	require.ErrorIs(t, v.q.Close(), queue.ErrClosed, "a second Close")
}

func testCompeting(t *testing.T, e Engine) {
	v := open(t, e, Options{AckTimeout: time.Hour})
	const consumers, messages = 4, 200
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	errc := make(chan error, consumers+1)
	for range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := v.q.Dequeue(ctx)
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						errc <- err
					}
					return
				}
				if err := m.Ack(); err != nil {
					errc <- err
					return
				}
				mu.Lock()
				seen[string(m.Payload)]++
				done := len(seen) == messages
				mu.Unlock()
				if done {
					cancel()
				}
			}
		}()
	}
	for i := range messages {
		if _, err := v.q.Enqueue(context.Background(), []byte(fmt.Sprint(i))); err != nil {
			errc <- err
			break
		}
	}
	waitOrFail(t, &wg, 30*time.Second)
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}
	require.Len(t, seen, messages)
	for p, n := range seen {
		require.Equal(t, 1, n, "message %s acked %d times", p, n)
	}
	s := v.q.Stats()
	require.Equal(t, uint64(messages), s.Acked)
	require.Equal(t, uint64(messages), s.Delivered)
	require.Zero(t, s.Ready+s.InFlight)
}

func waitOrFail(t *testing.T, wg *sync.WaitGroup, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatal("consumers did not finish")
	}
}

func testStats(t *testing.T, e Engine) {
	v := open(t, e, Options{MaxDeliveries: 1, AckTimeout: 10 * time.Second})
	at := v.clock.Now()
	for i := range 6 {
		v.enqueue(fmt.Sprint(i))
	}
	v.enqueue("delayed", queue.WithDelay(time.Hour))
	v.clock.Advance(time.Second)
	acked, dead, leased := v.next(), v.next(), v.next()
	require.NoError(t, acked.Ack())
	require.NoError(t, dead.Nack(0), "the first nack at MaxDeliveries 1 is dead")
	s := v.q.Stats()
	require.Equal(t, int64(3), s.Ready)
	require.Equal(t, int64(1), s.Delayed)
	require.Equal(t, int64(1), s.InFlight)
	require.Equal(t, int64(1), s.Dead)
	require.Equal(t, uint64(7), s.Enqueued)
	require.Equal(t, uint64(3), s.Delivered)
	require.Equal(t, uint64(1), s.Acked)
	require.Equal(t, uint64(1), s.DeadLettered)
	require.Equal(t, 10*time.Second, s.AckTimeout)
	require.True(t, s.OldestEnqueuedAt.Equal(at), "OldestEnqueuedAt %v, want %v", s.OldestEnqueuedAt, at)
	require.NoError(t, s.OldestErr, "every record and body is sound")
	require.NoError(t, s.CountsErr)
	require.NoError(t, leased.Nack(0))
	s = v.q.Stats()
	require.Equal(t, int64(2), s.Dead, "nacked at MaxDeliveries")
	require.Equal(t, int64(0), s.InFlight)
}

// testStatsAt: Stats.At is when the figures were read, by the queue's
// clock, and Closed is set once the handle is closed.
func testStatsAt(t *testing.T, e Engine) {
	v := open(t, e, Options{})
	s := v.q.Stats()
	require.True(t, s.At.Equal(v.clock.Now()), "At %v, want %v", s.At, v.clock.Now())
	require.False(t, s.Closed)
	v.clock.Advance(90 * time.Second)
	v.enqueue("m")
	s = v.q.Stats()
	require.True(t, s.At.Equal(v.clock.Now()), "At %v, want %v", s.At, v.clock.Now())
	require.Equal(t, int64(1), s.Ready)
	require.NoError(t, v.q.Close())
	s = v.q.Stats()
	require.True(t, s.Closed, "Stats after Close: %+v", s)
}
