package redisq

import (
	"context"
	_ "embed"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// The previous version's library (d5d54b0, layout 2), as FUNCTION LOAD
// takes it: handles of both versions may share a queue during an upgrade.
//
//go:embed testdata/library-d5d54b0.lua
var olderLibrary string

const olderName = "walq_a78e2272798dc16c"

// older runs the previous version's function op on q's queue at now, with
// the arguments that version's client sends.
func older(t *testing.T, q *Queue, op string, now time.Time, args ...any) []any {
	t.Helper()
	argv := append([]any{q.wake, unixMicros(now), q.o.MaxDeliveries, micros(q.o.DedupWindow)}, args...)
	v, err := q.rdb.FCall(context.Background(), olderName+"_"+op, q.keys, argv...).Result()
	require.NoError(t, err)
	reply, _ := v.([]any)
	return reply
}

// olderEnqueue enqueues payload through the previous version, due after
// delay (0: now).
func olderEnqueue(t *testing.T, q *Queue, payload string, delay time.Duration) {
	t.Helper()
	now := time.Now()
	a, err := q.itemArgs(now, &queue.Item{Payload: []byte(payload), Delay: delay})
	require.NoError(t, err)
	require.Equal(t, []any{int64(1)}, older(t, q, "enqueue", now, append([]any{"all", 1}, a[:]...)...))
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
