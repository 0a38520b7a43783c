package redisq

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestDowngrade: the handles of this version are replaced by those of an
// earlier release of layout 2 (the frozen libraries of d5d54b0, 36684de
// and 5a7e6e2). This version writes nothing those releases do not read
// (the placeholders they check are the ones they wrote), so they take
// the queue over as it stands, not as an empty one: they count its
// messages, ack a lease this version took, deliver its ready messages in
// order, promote its delayed one once due, and refuse a producer id it
// holds.
func TestDowngrade(t *testing.T) {
	for _, c := range []struct {
		release, lib, name string
		deadline           bool // its dequeue takes the lease's deadline, not its length
	}{
		{"d5d54b0", olderLibrary, olderName, false},
		{"36684de", previousLibrary, previousName, false},
		{"5a7e6e2", unguardedLibrary, unguardedName, true},
	} {
		t.Run(c.release, func(t *testing.T) {
			ctx := context.Background()
			srv := redistest.Start(t)
			rdb := srv.Client()
			require.NoError(t, rdb.FunctionLoad(ctx, c.lib).Err())
			q, err := Open(ctx, rdb, "downgrade", &Options{AckTimeout: time.Minute, ManualRequeue: true})
			require.NoError(t, err)
			for _, p := range []string{"a", "b"} {
				_, err = q.Enqueue(ctx, []byte(p))
				require.NoError(t, err)
			}
			_, err = q.EnqueueBatch(ctx, []queue.Item{{ID: "pc", Payload: []byte("c")}})
			require.NoError(t, err)
			due := time.Now().Add(300 * time.Millisecond)
			_, err = q.Enqueue(ctx, []byte("d"), queue.WithDeliverAt(due))
			require.NoError(t, err)
			m, err := q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, "a", string(m.Payload))
			require.NoError(t, q.Close())

			old := func(op string, args ...any) []any {
				t.Helper()
				return earlier(t, q, c.name, op, time.Now(), args...)
			}
			stats := old("inspect", "stats")
			require.Equal(t, []any{int64(2), int64(1), int64(1), int64(0)}, stats[:4], "ready, delayed, in flight, dead")
			require.Equal(t, []any{int64(0)}, old("settle", "ack", "", "r",
				strconv.FormatUint(m.Receipt.Seq, 10), strconv.FormatUint(m.Receipt.Lease, 10)), "this version's lease acked")
			lease := func(n int) []string {
				t.Helper()
				lasts := micros(time.Minute)
				if c.deadline {
					lasts = dueMicros(time.Now().Add(time.Minute))
				}
				args := []any{lasts, n}
				for range n {
					args = append(args, strconv.FormatUint(newToken(), 10))
				}
				got := old("dequeue", args...)
				var payloads []string
				for i := 1; i+2 < len(got); i += 3 {
					msg, err := decodeMessage(got[i+2], queue.Receipt{})
					require.NoError(t, err)
					payloads = append(payloads, string(msg.Payload))
				}
				return payloads
			}
			require.Equal(t, []string{"b", "c"}, lease(10))
			a, err := q.itemArgs(time.Now(), &queue.Item{ID: "pc", Payload: []byte("again")})
			require.NoError(t, err)
			argv := append([]any{q.wake, unixMicros(time.Now()), q.o.MaxDeliveries, micros(q.o.DedupWindow), "all", 1}, a[:]...)
			err = rdb.FCall(ctx, c.name+"_enqueue", q.keys, argv...).Err()
			require.ErrorContains(t, err, "DUPLICATE pc", "the producer id of this version's message is live")

			time.Sleep(time.Until(due) + 10*time.Millisecond)
			old("housekeep", "1", 100)
			require.Equal(t, []string{"d"}, lease(10), "the delayed message, once due")
		})
	}
}

// TestNewerLayoutRefused: a release that changes what layout 2's keys
// hold writes another mark in place of their placeholders (see intact:
// msg's field ”, the member of ready and lease); this
// version then refuses the queue, at Open and at every call of a handle
// already open, with ErrLayout naming both layouts, and writes nothing:
// it would misread what that release wrote.
func TestNewerLayoutRefused(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	q, err := Open(ctx, rdb, "newer", &Options{ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("a"))
	require.NoError(t, err)
	msg, keep, mark := q.keys[1], strings.Repeat("~", 256), strings.Repeat("~", 253)+"3.1"
	require.NoError(t, rdb.HSet(ctx, msg, "", mark).Err())
	for _, set := range []string{q.keys[2], q.keys[4]} { // ready, lease
		require.NoError(t, rdb.ZRem(ctx, set, keep).Err())
		require.NoError(t, rdb.ZAdd(ctx, set, redis.Z{Score: math.Inf(1), Member: mark}).Err())
	}
	before, err := rdb.HGetAll(ctx, msg).Result()
	require.NoError(t, err)

	refused := func(err error, what string) {
		t.Helper()
		require.ErrorIs(t, err, ErrLayout, what)
		require.ErrorContains(t, err, "holds the mark of layout 3.1", what)
		require.ErrorContains(t, err, "this version handles layout 2 only", what)
	}
	_, err = Open(ctx, rdb, "newer", nil)
	refused(err, "Open")
	_, err = q.Enqueue(ctx, []byte("b"))
	refused(err, "an enqueue")
	_, err = q.EnqueueBatch(ctx, []queue.Item{{ID: "p", Payload: []byte("c")}})
	refused(err, "a batch")
	_, err = q.TryDequeue()
	refused(err, "a dequeue")
	_, err = q.DequeueBatch(ctx, 5)
	refused(err, "a batch dequeue")
	_, err = q.StatsContext(ctx)
	refused(err, "stats")
	after, err := rdb.HGetAll(ctx, msg).Result()
	require.NoError(t, err)
	require.Equal(t, before, after, "nothing written")
}
