package redisq

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// Earlier versions' libraries (layout 2), as FUNCTION LOAD takes them:
// handles of several versions may share a queue during an upgrade.
// d5d54b0 is the last before '#w' and '#t'; 36684de the last before
// scripts stopped handing numbers to redis.call.
var (
	//go:embed testdata/library-d5d54b0.lua
	olderLibrary string
	//go:embed testdata/library-36684de.lua
	previousLibrary string
)

const (
	olderName    = "walq_a78e2272798dc16c"
	previousName = "walq_7ec72a9526d25ff3"
)

// older runs the d5d54b0 version's function op on q's queue at now, with
// the arguments that version's client sends.
func older(t *testing.T, q *Queue, op string, now time.Time, args ...any) []any {
	t.Helper()
	return earlier(t, q, olderName, op, now, args...)
}

// earlier runs the function op of the library lib on q's queue at now.
func earlier(t *testing.T, q *Queue, lib, op string, now time.Time, args ...any) []any {
	t.Helper()
	argv := append([]any{q.wake, unixMicros(now), q.o.MaxDeliveries, micros(q.o.DedupWindow)}, args...)
	v, err := q.rdb.FCall(context.Background(), lib+"_"+op, q.keys, argv...).Result()
	require.NoError(t, err)
	reply, _ := v.([]any)
	return reply
}

// olderEnqueue enqueues payload through the d5d54b0 version, due after
// delay (0: now).
func olderEnqueue(t *testing.T, q *Queue, payload string, delay time.Duration) {
	t.Helper()
	earlierEnqueue(t, q, olderName, queue.Item{Payload: []byte(payload), Delay: delay})
}

// earlierEnqueue enqueues items through the library lib, as one batch.
func earlierEnqueue(t *testing.T, q *Queue, lib string, items ...queue.Item) {
	t.Helper()
	now := time.Now()
	args := []any{"all", len(items)}
	want := make([]any, len(items))
	for i := range items {
		a, err := q.itemArgs(now, &items[i])
		require.NoError(t, err)
		args = append(args, a[:]...)
		want[i] = int64(1)
	}
	require.Equal(t, want, earlier(t, q, lib, "enqueue", now, args...))
}

// TestMixedVersions: while handles of the previous version share the
// queue, receipts of either version settle with the other, and a delayed
// message the previous version adds (which does not lower '#w') is still
// delivered once due, by a housekeeper (armed by the older enqueue's
// announcement) or by a dequeue that finds nothing else ready.
func TestMixedVersions(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	require.NoError(t, rdb.FunctionLoad(ctx, olderLibrary).Err())
	q, err := Open(ctx, rdb, "mixed", &Options{AckTimeout: time.Minute})
	require.NoError(t, err)
	defer q.Close()

	// An older lease, acked by this version; a lease of this version,
	// acked by the older one.
	olderEnqueue(t, q, "a", 0)
	tok := newToken()
	got := older(t, q, "dequeue", time.Now(), micros(q.o.AckTimeout), 1, strconv.FormatUint(tok, 10))
	require.Len(t, got, 4)
	require.NoError(t, q.Ack(queue.Receipt{Seq: uint64(toInt(got[1])), Lease: tok}))
	olderEnqueue(t, q, "b", 0)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "b", string(m.Payload))
	r := m.Receipt
	require.Equal(t, []any{int64(0)}, older(t, q, "settle", time.Now(), "ack", "", "r",
		strconv.FormatUint(r.Seq, 10), strconv.FormatUint(r.Lease, 10)))
	require.ErrorIs(t, m.Ack(), queue.ErrLeaseLost)

	// '#w' now says nothing is delayed; the older version adds a delayed
	// message without lowering it.
	_, err = q.TryDequeue()
	require.ErrorIs(t, err, queue.ErrEmpty)
	olderEnqueue(t, q, "fresh", 0)
	due := time.Now().Add(200 * time.Millisecond) // no later than the one the enqueue sets
	olderEnqueue(t, q, "late", 200*time.Millisecond)
	m, err = q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "fresh", string(m.Payload))
	require.NoError(t, m.Ack())
	wait, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err = q.Dequeue(wait)
	require.NoError(t, err, "the older version's delayed message within 5s")
	require.Equal(t, "late", string(m.Payload))
	require.False(t, time.Now().Before(due), "not before its due time")
	require.NoError(t, m.Ack())
	s := q.Stats()
	require.Zero(t, s.Ready+s.InFlight+s.Delayed)
}

// TestMixedWithPrevious: handles of this version and of 36684de share a
// queue: leases of either, lone and gathered, settle with the other's
// receipts; a nack of one is delivered again by the other; and a
// producer id acked by this version stays refused by the other for
// DedupWindow.
func TestMixedWithPrevious(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	require.NoError(t, rdb.FunctionLoad(ctx, previousLibrary).Err())
	q, err := Open(ctx, rdb, "mixed-previous", &Options{AckTimeout: time.Minute, DedupWindow: time.Hour})
	require.NoError(t, err)
	defer q.Close()
	prev := func(op string, args ...any) []any {
		t.Helper()
		return earlier(t, q, previousName, op, time.Now(), args...)
	}
	lease := func(n int) ([]queue.Receipt, []any) {
		t.Helper()
		args := []any{micros(q.o.AckTimeout), n}
		toks := make([]uint64, n)
		for i := range toks {
			toks[i] = newToken()
			args = append(args, strconv.FormatUint(toks[i], 10))
		}
		got := prev("dequeue", args...)
		require.Len(t, got, 1+3*n)
		rs := make([]queue.Receipt, n)
		for i := range rs {
			rs[i] = queue.Receipt{Seq: uint64(toInt(got[1+3*i])), Lease: toks[i]}
		}
		return rs, got
	}

	// Its lone lease, acked here; a lease of this version, acked there.
	earlierEnqueue(t, q, previousName, queue.Item{Payload: []byte("a")})
	rs, _ := lease(1)
	require.NoError(t, q.Ack(rs[0]))
	_, err = q.Enqueue(ctx, []byte("b"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	r := m.Receipt
	require.Equal(t, []any{int64(0)}, prev("settle", "ack", "", "r", strconv.FormatUint(r.Seq, 10), strconv.FormatUint(r.Lease, 10)))
	require.ErrorIs(t, m.Ack(), queue.ErrLeaseLost)

	// Its batch lease, acked here by one gathered call, a receipt already
	// used among them.
	earlierEnqueue(t, q, previousName, queue.Item{Payload: []byte("c")}, queue.Item{Payload: []byte("d")}, queue.Item{Payload: []byte("e")})
	rs, _ = lease(3)
	errs := q.settle("ack", "", append(rs, r))
	require.Equal(t, []error{nil, nil, nil}, errs[:3])
	require.ErrorIs(t, errs[3], queue.ErrLeaseLost)

	// A nack there, delivered again here.
	_, err = q.Enqueue(ctx, []byte("f"))
	require.NoError(t, err)
	rs, got := lease(1)
	require.Equal(t, int64(1), toInt(got[2]))
	require.Equal(t, []any{int64(0)}, prev("settle", "nack", "0", "r", strconv.FormatUint(rs[0].Seq, 10), strconv.FormatUint(rs[0].Lease, 10)))
	m, err = q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "f", string(m.Payload))
	require.Equal(t, 2, m.Deliveries)
	require.NoError(t, m.Ack())

	// A producer id acked here is refused there.
	_, err = q.EnqueueBatch(ctx, []queue.Item{{ID: "p1", Payload: []byte("g")}})
	require.NoError(t, err)
	m, err = q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.Ack())
	a, err := q.itemArgs(time.Now(), &queue.Item{ID: "p1", Payload: []byte("g")})
	require.NoError(t, err)
	argv := append([]any{q.wake, unixMicros(time.Now()), q.o.MaxDeliveries, micros(q.o.DedupWindow), "all", 1}, a[:]...)
	err = rdb.FCall(ctx, previousName+"_enqueue", q.keys, argv...).Err()
	require.ErrorContains(t, err, "DUPLICATE p1")
	s := q.Stats()
	require.Zero(t, s.Ready+s.InFlight+s.Delayed)
	require.Equal(t, uint64(7), s.Acked)
}

// TestEnqueueFunctionTakesGeneratedIDs: the enqueue function of this
// version's library, called with messages of generated ids ready at once
// as an earlier version's client called its own (a handle sends such
// messages to enqueue1), enqueues them all, in both modes, with or
// without a DedupWindow, and announces them once a consumer found none.
func TestEnqueueFunctionTakesGeneratedIDs(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for _, window := range []time.Duration{0, time.Hour} {
		for _, mode := range []string{"all", "each"} {
			t.Run(fmt.Sprintf("%s/window %v", mode, window), func(t *testing.T) {
				q, err := Open(ctx, srv.Client(), fmt.Sprintf("generated-%s-%d", mode, window), &Options{DedupWindow: window})
				require.NoError(t, err)
				defer q.Close()
				sub := srv.Client().Subscribe(ctx, q.wake)
				defer sub.Close()
				_, err = sub.Receive(ctx) // the subscription is in place
				require.NoError(t, err)
				_, err = q.TryDequeue() // a consumer found none: the next enqueue announces
				require.ErrorIs(t, err, queue.ErrEmpty)
				now := time.Now()
				args := []any{mode, 3}
				for _, p := range []string{"a", "b", "c"} {
					a, err := q.itemArgs(now, &queue.Item{Payload: []byte(p)})
					require.NoError(t, err)
					args = append(args, a[:]...)
				}
				require.Equal(t, []any{int64(1), int64(1), int64(1)}, earlier(t, q, library.name, "enqueue", now, args...))
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				msg, err := sub.ReceiveMessage(rctx)
				require.NoError(t, err)
				require.Equal(t, "r", msg.Payload, "the enqueue announced its messages")
				for _, want := range []string{"a", "b", "c"} {
					m, err := q.TryDequeue()
					require.NoError(t, err)
					require.Equal(t, want, string(m.Payload))
					require.NoError(t, m.Ack())
				}
			})
		}
	}
}
