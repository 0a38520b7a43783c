package redisq_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestGivenBackNotDelivered: a lease taken for a grouped Dequeue whose
// caller left while its call was held (CLIENT PAUSE WRITE) is given
// back as never handed out. No consumer got it, so it is no delivery:
// with MaxDeliveries 2 and consumers that keep leaving, no message is
// dead-lettered, every message a consumer gets says it is its first
// delivery (each is acked the first time), and no nack is counted.
func TestGivenBackNotDelivered(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	q, err := redisq.Open(ctx, rdb, "givenback",
		&redisq.Options{AckTimeout: time.Minute, MaxDeliveries: 2})
	require.NoError(t, err)
	defer q.Close()
	const n = 200
	enqueueNumbered(t, q, n)
	holdWrites(t, srv)
	got := leavingConsumers(t, q, n)
	s, err := q.StatsContext(ctx)
	require.NoError(t, err)
	require.Zero(t, s.Dead, "dead-lettered, though no consumer got them: %+v", s)
	require.Zero(t, s.DeadLettered, "%+v", s)
	require.Zero(t, s.Nacked, "no consumer nacked: %+v", s)
	require.Equal(t, n, len(got), "every message acked within 30s: %+v", s)
	for id, ds := range got {
		require.Equal(t, []int{1}, ds, "message %s: the deliveries each consumer's receipt said", id)
	}
	require.Equal(t, uint64(n), s.Delivered, "deliveries counted: one per message a consumer got")
}

// TestGivenBackDuringClose: a grouped Dequeues' call that the server
// holds (CLIENT PAUSE WRITE) while its callers leave and Close begins
// leases for callers that left. Close waits for that call, and gives
// its leases back before it returns, as an open handle does: no
// delivery is counted, the messages are ready at once, not leased until
// AckTimeout (a minute) runs out, and with MaxDeliveries 1 the next
// delivery of each is its first, not one that dead-letters it.
//
// The server first refuses writes (READONLY): a lone Dequeue (a) rides
// the refusals until its context ends at 0.5s, while b and c queue
// behind it; then b and c ride together. At 0.8s the server pauses
// writes for 2s and takes writes again, so the next send of b and c is
// held; their contexts end at 1.6s, Close is called at 1.8s, and the
// held call leases two messages once the pause ends, at 2.8s.
func TestGivenBackDuringClose(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	o := &redisq.Options{OpTimeout: 10 * time.Second, AckTimeout: time.Minute, MaxDeliveries: 1}
	q, err := redisq.Open(ctx, rdb, "closegiveback", o)
	require.NoError(t, err)
	const n = 3
	enqueueNumbered(t, q, n)
	// Every command the server runs goes to the slow log, with its
	// arguments: what shows that the give-back ran.
	require.NoError(t, rdb.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err())
	require.NoError(t, rdb.ConfigSet(ctx, "slowlog-max-len", "100000").Err())
	allow := refuseWrites(t, rdb)
	defer rdb.Do(ctx, "REPLICAOF", "NO", "ONE")

	start := time.Now()
	dequeue := func(until time.Duration) <-chan error {
		out := make(chan error, 1)
		go func() {
			dctx, cancel := context.WithDeadline(ctx, start.Add(until))
			defer cancel()
			m, err := q.Dequeue(dctx)
			if err == nil {
				err = fmt.Errorf("got message %s", m.ID)
			}
			out <- err
		}()
		return out
	}
	a := dequeue(500 * time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	b, c := dequeue(1600*time.Millisecond), dequeue(1600*time.Millisecond)
	time.Sleep(time.Until(start.Add(800 * time.Millisecond)))
	require.NoError(t, rdb.Do(ctx, "CLIENT", "PAUSE", 2000, "WRITE").Err())
	allow()
	for _, ch := range []<-chan error{a, b, c} {
		require.ErrorIs(t, <-ch, context.DeadlineExceeded)
	}
	time.Sleep(time.Until(start.Add(1800 * time.Millisecond)))
	require.NoError(t, q.Close())
	// The give-back alone ran past Close: any other settle is refused.
	r := queue.Receipt{Seq: 1, Lease: 1}
	require.ErrorIs(t, q.Nack(r, 0), queue.ErrClosed)
	require.ErrorIs(t, q.Extend(r, time.Minute), queue.ErrClosed)
	require.ErrorIs(t, q.DeadLetter(r, "x"), queue.ErrClosed)
	require.ErrorIs(t, q.AckID("0"), queue.ErrClosed)
	require.ErrorIs(t, q.NackID("0", 0), queue.ErrClosed)

	q2, err := redisq.Open(ctx, rdb, "closegiveback", o)
	require.NoError(t, err)
	defer q2.Close()
	s, err := q2.StatsContext(ctx)
	require.NoError(t, err)
	require.Zero(t, s.InFlight, "leased for callers that left, not given back: %+v", s)
	require.Equal(t, int64(n), s.Ready, "%+v", s)
	require.Zero(t, s.Delivered, "deliveries counted, though no consumer got one: %+v", s)
	require.Equal(t, 2, releasedBy(t, rdb), "the server gave back the leases of b and c")
	for range n {
		m, err := q2.TryDequeue()
		require.NoError(t, err)
		require.Equal(t, 1, m.Deliveries, "message %s", m.ID)
		require.NoError(t, m.Ack())
	}
	s, err = q2.StatsContext(ctx)
	require.NoError(t, err)
	require.Zero(t, s.Dead, "%+v", s)
	require.Equal(t, uint64(n), s.Acked, "%+v", s)
}

// releasedBy returns how many leases the server's slow log shows given
// back (the settle function's op "release"), each named by its seq and
// lease token after the op, its argument and 'r'.
func releasedBy(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	logs, err := rdb.SlowLogGet(context.Background(), -1).Result()
	require.NoError(t, err)
	n := 0
	for _, e := range logs {
		if len(e.Args) < 2 || !strings.EqualFold(e.Args[0], "FCALL") || !strings.HasSuffix(e.Args[1], "_settle") {
			continue
		}
		if i := slices.Index(e.Args, "release"); i >= 0 {
			n += (len(e.Args) - i - 3) / 2
		}
	}
	return n
}
