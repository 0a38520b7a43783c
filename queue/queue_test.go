package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

func TestFIFOAndAck(t *testing.T) {
	q := open(t, t.TempDir(), nil)
	defer q.Close()
	for i := 0; i < 5; i++ {
		enqueue(t, q, fmt.Sprint("m", i))
	}
	for i := 0; i < 5; i++ {
		m := tryDequeue(t, q)
		require.Equal(t, fmt.Sprint("m", i), string(m.Payload))
		require.Equal(t, 1, m.Deliveries)
		require.NoError(t, m.Ack())
	}
	requireEmpty(t, q)
	st := q.Stats()
	require.EqualValues(t, 5, st.Enqueued)
	require.EqualValues(t, 5, st.Acked)
	require.Zero(t, st.Ready+st.InFlight+st.Delayed+st.Dead)
}

func TestMessageFields(t *testing.T) {
	clk := newFakeClock()
	q := open(t, t.TempDir(), &queue.Options{Clock: clk})
	defer q.Close()
	id := enqueue(t, q, "hello", queue.WithHeaders(map[string]string{"k": "v"}))
	require.Len(t, id, 36, "generated ids are UUIDs")
	clk.Advance(time.Second)
	m := tryDequeue(t, q)
	require.Equal(t, id, m.ID)
	require.Equal(t, map[string]string{"k": "v"}, m.Headers)
	require.True(t, m.EnqueuedAt.Equal(clk.Now().Add(-time.Second)))
	require.True(t, m.DeliveredAt.Equal(clk.Now()))
	r, err := queue.ParseReceipt(m.Receipt.String())
	require.NoError(t, err)
	require.Equal(t, m.Receipt, r)
}

func TestDequeueBlocksUntilEnqueue(t *testing.T) {
	q := open(t, t.TempDir(), nil)
	defer q.Close()
	got := make(chan *queue.Message)
	go func() {
		m, err := q.Dequeue(context.Background())
		if err != nil {
			panic(err)
		}
		got <- m
	}()
	enqueue(t, q, "wake")
	select {
	case m := <-got:
		require.Equal(t, "wake", string(m.Payload))
	case <-time.After(10 * time.Second):
		t.Fatal("Dequeue was not woken by Enqueue")
	}
}

func TestDequeueEndsWithContextAndClose(t *testing.T) {
	q := open(t, t.TempDir(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	go func() { _, err := q.Dequeue(ctx); errs <- err }()
	cancel()
	require.ErrorIs(t, <-errs, context.Canceled)
	go func() { _, err := q.Dequeue(context.Background()); errs <- err }()
	time.Sleep(10 * time.Millisecond) // let it block; correctness does not depend on it
	require.NoError(t, q.Close())
	require.ErrorIs(t, <-errs, queue.ErrClosed)
}

func TestAckTimeoutRedelivers(t *testing.T) {
	clk := newFakeClock()
	q := open(t, t.TempDir(), &queue.Options{Clock: clk, AckTimeout: time.Minute, ManualRequeue: true})
	defer q.Close()
	enqueue(t, q, "a")
	first := tryDequeue(t, q)
	requireEmpty(t, q)

	clk.Advance(59 * time.Second)
	n, err := q.RequeueExpired()
	require.NoError(t, err)
	require.Zero(t, n, "the lease runs from delivery and has a second left")

	clk.Advance(2 * time.Second)
	n, err = q.RequeueExpired()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	second := tryDequeue(t, q)
	require.Equal(t, first.ID, second.ID)
	require.Equal(t, 2, second.Deliveries)
	require.True(t, first.EnqueuedAt.Equal(second.EnqueuedAt))

	require.ErrorIs(t, first.Ack(), queue.ErrLeaseLost, "the first consumer's receipt is fenced off")
	require.ErrorIs(t, first.Nack(0), queue.ErrLeaseLost)
	require.ErrorIs(t, first.Extend(time.Second), queue.ErrLeaseLost)
	require.NoError(t, second.Ack())
	require.ErrorIs(t, second.Ack(), queue.ErrLeaseLost, "a second ack finds no lease")
}

func TestAutomaticRequeue(t *testing.T) {
	q := open(t, t.TempDir(), &queue.Options{AckTimeout: 20 * time.Millisecond})
	defer q.Close()
	enqueue(t, q, "a")
	first := tryDequeue(t, q)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	again, err := q.Dequeue(ctx) // woken by the housekeeper when the lease runs out
	require.NoError(t, err)
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, 2, again.Deliveries)
}

func TestNackAndDelay(t *testing.T) {
	clk := newFakeClock()
	q := open(t, t.TempDir(), &queue.Options{Clock: clk})
	defer q.Close()
	enqueue(t, q, "a")
	m := tryDequeue(t, q)
	require.NoError(t, m.Nack(10*time.Second))
	requireEmpty(t, q)
	require.EqualValues(t, 1, q.Stats().Delayed)
	clk.Advance(10 * time.Second)
	m = tryDequeue(t, q)
	require.Equal(t, "a", string(m.Payload))
	require.NoError(t, m.Nack(0))
	m = tryDequeue(t, q)
	require.Equal(t, 3, m.Deliveries)
	require.NoError(t, m.Ack())
}

func TestDelayedEnqueue(t *testing.T) {
	clk := newFakeClock()
	q := open(t, t.TempDir(), &queue.Options{Clock: clk})
	defer q.Close()
	enqueue(t, q, "later", queue.WithDelay(time.Minute))
	enqueue(t, q, "at", queue.WithDeliverAt(clk.Now().Add(30*time.Second)))
	enqueue(t, q, "now")
	m := tryDequeue(t, q)
	require.Equal(t, "now", string(m.Payload))
	require.NoError(t, m.Ack())
	requireEmpty(t, q)
	clk.Advance(30 * time.Second)
	m = tryDequeue(t, q)
	require.Equal(t, "at", string(m.Payload))
	require.NoError(t, m.Ack())
	requireEmpty(t, q)

	got := make(chan string)
	go func() {
		m, err := q.Dequeue(context.Background())
		if err != nil {
			panic(err)
		}
		got <- string(m.Payload)
	}()
	for {
		clk.Advance(time.Second) // the waiting Dequeue's timer fires at the due time
		select {
		case p := <-got:
			require.Equal(t, "later", p)
			require.False(t, clk.Now().Before(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)))
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestExtend(t *testing.T) {
	clk := newFakeClock()
	q := open(t, t.TempDir(), &queue.Options{Clock: clk, AckTimeout: time.Minute, ManualRequeue: true})
	defer q.Close()
	enqueue(t, q, "a")
	m := tryDequeue(t, q)
	clk.Advance(50 * time.Second)
	require.NoError(t, m.Extend(time.Minute))
	clk.Advance(50 * time.Second)
	n, err := q.RequeueExpired()
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, m.Ack())
}

func TestMaxDeliveriesAndDeadLetters(t *testing.T) {
	clk := newFakeClock()
	q := open(t, t.TempDir(), &queue.Options{Clock: clk, MaxDeliveries: 2, ManualRequeue: true, AckTimeout: time.Second})
	defer q.Close()
	id := enqueue(t, q, "poison")
	require.NoError(t, tryDequeue(t, q).Nack(0))
	clk.Advance(0)
	tryDequeue(t, q)
	clk.Advance(2 * time.Second)
	_, err := q.RequeueExpired()
	require.NoError(t, err)
	requireEmpty(t, q)

	dl, err := q.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, dl, 1)
	require.Equal(t, id, dl[0].ID)
	require.Equal(t, "poison", string(dl[0].Payload))
	require.Equal(t, 2, dl[0].Deliveries)
	require.Contains(t, dl[0].Reason, "ack timeout")
	require.EqualValues(t, 1, q.Stats().Dead)

	require.NoError(t, q.RequeueDead(id))
	m := tryDequeue(t, q)
	require.Equal(t, 1, m.Deliveries, "a requeued dead letter starts counting again")
	require.NoError(t, m.DeadLetter("bad input"))
	dl, err = q.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Equal(t, "bad input", dl[0].Reason)
	require.NoError(t, q.PurgeDead(id))
	require.ErrorIs(t, q.PurgeDead(id), queue.ErrNotFound)
	require.EqualValues(t, 0, q.Stats().Dead)
}

func TestDeadLetterAll(t *testing.T) {
	q := open(t, t.TempDir(), nil)
	defer q.Close()
	for i := 0; i < 3; i++ {
		enqueue(t, q, fmt.Sprint(i))
		require.NoError(t, tryDequeue(t, q).DeadLetter("x"))
	}
	n, err := q.RequeueAllDead()
	require.NoError(t, err)
	require.Equal(t, 3, n)
	for i := 0; i < 3; i++ {
		require.NoError(t, tryDequeue(t, q).DeadLetter("y"))
	}
	n, err = q.PurgeAllDead()
	require.NoError(t, err)
	require.Equal(t, 3, n)
	requireEmpty(t, q)
}

// TestDeadLetterAllClosed: on a closed queue the calls on every dead
// letter fail with ErrClosed, even with no dead letter to change, as
// the sorted queue's do.
func TestDeadLetterAllClosed(t *testing.T) {
	q := open(t, t.TempDir(), nil)
	require.NoError(t, q.Close())
	_, err := q.PurgeAllDead()
	require.ErrorIs(t, err, queue.ErrClosed)
	_, err = q.RequeueAllDead()
	require.ErrorIs(t, err, queue.ErrClosed)
}

func TestByID(t *testing.T) {
	q := open(t, t.TempDir(), nil)
	defer q.Close()
	enqueue(t, q, "a", queue.WithID("job-1"))
	enqueue(t, q, "b", queue.WithID("job-2"))
	require.ErrorIs(t, q.AckID("job-1"), queue.ErrNotFound, "not delivered yet")
	tryDequeue(t, q)
	tryDequeue(t, q)
	require.NoError(t, q.AckID("job-1"))
	require.NoError(t, q.ExtendID("job-2", time.Minute))
	require.NoError(t, q.NackID("job-2", 0))
	tryDequeue(t, q)
	require.NoError(t, q.DeadLetterID("job-2", "manual"))
	require.ErrorIs(t, q.AckID("nope"), queue.ErrNotFound)
}

func TestDedup(t *testing.T) {
	clk := newFakeClock()
	q := open(t, t.TempDir(), &queue.Options{Clock: clk, DedupWindow: time.Hour})
	defer q.Close()
	ctx := context.Background()
	enqueue(t, q, "a", queue.WithID("x"))
	_, err := q.Enqueue(ctx, []byte("a"), queue.WithID("x"))
	require.ErrorIs(t, err, queue.ErrDuplicate, "live id")
	_, err = q.EnqueueBatch(ctx, []queue.Item{{ID: "y"}, {ID: "y"}})
	require.ErrorIs(t, err, queue.ErrDuplicate, "repeated within a batch")
	require.NoError(t, tryDequeue(t, q).Ack())
	requireEmpty(t, q)
	_, err = q.Enqueue(ctx, []byte("a"), queue.WithID("x"))
	require.ErrorIs(t, err, queue.ErrDuplicate, "acked within the window")
	clk.Advance(time.Hour + time.Second)
	enqueue(t, q, "a2", queue.WithID("x"))
	require.Equal(t, "a2", string(tryDequeue(t, q).Payload))
}

func TestDedupWithoutWindow(t *testing.T) {
	q := open(t, t.TempDir(), nil)
	defer q.Close()
	enqueue(t, q, "a", queue.WithID("x"))
	require.NoError(t, tryDequeue(t, q).Ack())
	enqueue(t, q, "b", queue.WithID("x"))
}

// TestDedupWindowClosedAtReopen: an open with no dedup window keeps no
// acked id, also one that an open with a window acked and snapshotted,
// whatever the clock reads (the same instant, or a step back).
func TestDedupWindowClosedAtReopen(t *testing.T) {
	for name, back := range map[string]time.Duration{"same instant": 0, "clock stepped back": -time.Second} {
		t.Run(name, func(t *testing.T) {
			clk, dir := newFakeClock(), t.TempDir()
			ackUnderWindow(t, clk, dir, "x")
			clk.Advance(back)
			q := open(t, dir, &queue.Options{Clock: clk})
			defer q.Close()
			enqueue(t, q, "b", queue.WithID("x"))
			require.Equal(t, "b", string(tryDequeue(t, q).Payload))
		})
	}
}

// TestDedupNoWindowForgetsAtOpen: an open with no dedup window forgets the
// acked ids a windowed open kept as it opens, whatever it does then, so
// its close snapshot omits them and a later windowed open accepts them.
func TestDedupNoWindowForgetsAtOpen(t *testing.T) {
	ctx := context.Background()
	for name, use := range map[string]func(*testing.T, *queue.Queue){
		"nothing enqueued": func(*testing.T, *queue.Queue) {},
		"async enqueue without an id": func(t *testing.T, q *queue.Queue) {
			p, err := q.EnqueueAsync(ctx, []byte("p"))
			require.NoError(t, err)
			require.NoError(t, p.Wait(ctx))
			require.NoError(t, tryDequeue(t, q).Ack())
		},
	} {
		t.Run(name, func(t *testing.T) {
			clk, dir := newFakeClock(), t.TempDir()
			ackUnderWindow(t, clk, dir, "x")
			q := open(t, dir, &queue.Options{Clock: clk})
			require.Zero(t, q.Stats().DedupIDs, "acked ids held by an open without a window")
			use(t, q)
			require.NoError(t, q.Close())
			q = open(t, dir, &queue.Options{Clock: clk, DedupWindow: time.Hour})
			defer q.Close()
			enqueue(t, q, "b", queue.WithID("x"))
		})
	}
}

// TestDedupNoWindowCrash: an open without a window forgets acked ids in
// memory; its snapshots keep the forget, so a windowed open after its
// clean close accepts them. After a crash, the next open rebuilds the ids
// from the last snapshot and the log since, and applies its own window
// from each ack's time: it refuses the ids acked within it (those the
// older snapshot kept and those acked in the log since), until the window
// passes.
func TestDedupNoWindowCrash(t *testing.T) {
	ctx := context.Background()
	clk, dir := newFakeClock(), t.TempDir()
	ackUnderWindow(t, clk, dir, "old")
	q := open(t, dir, &queue.Options{Clock: clk})
	enqueue(t, q, "b", queue.WithID("new"))
	require.NoError(t, tryDequeue(t, q).Ack())
	enqueue(t, q, "c", queue.WithID("live"))
	img := crashImage(t, dir)
	require.NoError(t, q.Close())
	for name, d := range map[string]string{"clean close": dir, "crash": img} {
		t.Run(name, func(t *testing.T) {
			q := open(t, d, &queue.Options{Clock: clk, DedupWindow: time.Hour})
			defer q.Close()
			_, err := q.Enqueue(ctx, []byte("l"), queue.WithID("live"))
			require.ErrorIs(t, err, queue.ErrDuplicate, "live id")
			for _, id := range []string{"old", "new"} {
				_, err := q.Enqueue(ctx, []byte(id), queue.WithID(id))
				if d == dir {
					require.NoError(t, err, "id forgotten by the open without a window, then closed")
				} else {
					require.ErrorIs(t, err, queue.ErrDuplicate, "id acked within the window, open crashed")
				}
			}
		})
	}
	clk.Advance(time.Hour + time.Second)
	q = open(t, img, &queue.Options{Clock: clk, DedupWindow: time.Hour})
	defer q.Close()
	enqueue(t, q, "o", queue.WithID("old"))
	enqueue(t, q, "n", queue.WithID("new"))
}

// TestDedupNoWindowCompactKeepsForget: a Compact right after an open
// without a window, which appended nothing, snapshots the forget at Open,
// so a windowed open after a crash accepts the forgotten id.
func TestDedupNoWindowCompactKeepsForget(t *testing.T) {
	ctx := context.Background()
	clk, dir := newFakeClock(), t.TempDir()
	ackUnderWindow(t, clk, dir, "old")
	q := open(t, dir, &queue.Options{Clock: clk})
	require.NoError(t, q.Compact())
	img := crashImage(t, dir)
	require.NoError(t, q.Close())
	q = open(t, img, &queue.Options{Clock: clk, DedupWindow: time.Hour})
	defer q.Close()
	_, err := q.Enqueue(ctx, []byte("o"), queue.WithID("old"))
	require.NoError(t, err, "id forgotten at Open, then compacted")
}

// TestRepairKeepsDedupIDs: Repair with no options keeps every acked id,
// whatever window the application's opens use.
func TestRepairKeepsDedupIDs(t *testing.T) {
	ctx := context.Background()
	clk, dir := newFakeClock(), t.TempDir()
	ackUnderWindow(t, clk, dir, "x")
	queue.TornTail(t, dir)
	rep, err := queue.Repair(dir, nil)
	require.NoError(t, err)
	require.True(t, rep.Repaired)
	q := open(t, dir, &queue.Options{Clock: clk, DedupWindow: time.Hour})
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("b"), queue.WithID("x"))
	require.ErrorIs(t, err, queue.ErrDuplicate, "acked id forgotten by the repair")
}

func TestEnqueueBatchAndDequeueBatch(t *testing.T) {
	q := open(t, t.TempDir(), nil)
	defer q.Close()
	items := make([]queue.Item, 10)
	for i := range items {
		items[i].Payload = []byte(fmt.Sprint(i))
	}
	ids, err := q.EnqueueBatch(context.Background(), items)
	require.NoError(t, err)
	require.Len(t, ids, 10)
	ms, err := q.DequeueBatch(context.Background(), 4)
	require.NoError(t, err)
	require.Len(t, ms, 4)
	for i, m := range ms {
		require.Equal(t, ids[i], m.ID)
	}
	ms, err = q.DequeueBatch(context.Background(), 100)
	require.NoError(t, err)
	require.Len(t, ms, 6)
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{MaxMessageSize: 10})
	_, err := queue.Open(dir, nil)
	require.ErrorIs(t, err, queue.ErrLocked)
	_, err = q.Enqueue(context.Background(), make([]byte, 11))
	require.ErrorIs(t, err, queue.ErrTooLarge)
	_, err = q.DequeueBatch(context.Background(), 0)
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
	require.ErrorIs(t, q.Ack(queue.Receipt{Seq: 99, Lease: 100}), queue.ErrLeaseLost)
	_, err = queue.ParseReceipt("x")
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
	require.NoError(t, q.Close())
	require.ErrorIs(t, q.Close(), queue.ErrClosed)
	_, err = q.Enqueue(context.Background(), nil)
	require.ErrorIs(t, err, queue.ErrClosed)
	_, err = q.TryDequeue()
	require.ErrorIs(t, err, queue.ErrClosed)
	require.ErrorIs(t, q.Compact(), queue.ErrClosed)
}

func TestInvalidOptions(t *testing.T) {
	for name, o := range map[string]*queue.Options{
		"negative ack timeout": {AckTimeout: -1},
		"tiny segment":         {SegmentSize: 100},
		"unknown sync":         {Sync: 9},
		"negative window":      {DedupWindow: -time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := queue.Open(t.TempDir(), o)
			require.ErrorIs(t, err, queue.ErrInvalidOptions)
		})
	}
}

func TestTyped(t *testing.T) {
	type job struct {
		Name string
		N    int
	}
	q := open(t, t.TempDir(), nil)
	defer q.Close()
	tq := queue.NewTyped[job](q)
	_, err := tq.Enqueue(context.Background(), job{"a", 1})
	require.NoError(t, err)
	v, m, err := tq.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, job{"a", 1}, v)
	require.NoError(t, m.Ack())
	_, _, err = tq.TryDequeue()
	require.ErrorIs(t, err, queue.ErrEmpty)
}
