package redisq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestPastMaxmemoryWholeOrNothing: on a master past maxmemory (with
// noeviction) every call either runs whole or is refused before it
// writes: the calls that add (Enqueue, Dequeue, Publish, Pull) are
// refused with the server's OOM, the ones that settle (Ack, Nack,
// DeadLetter, requeues, lease expiry) run. Once memory is freed, every
// message and value is delivered and acked exactly once, the dead ones
// aside: no refused call left half its writes behind.
func TestPastMaxmemoryWholeOrNothing(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory-policy", "noeviction")
	rdb := srv.Client()
	ctx := context.Background()
	q, err := redisq.Open(ctx, rdb, "oom", &redisq.Options{TrustServer: true, ManualRequeue: true, MaxDeliveries: -1})
	require.NoError(t, err)
	defer q.Close()
	s, err := redisq.OpenSorted[int64](ctx, rdb, "soom", &redisq.SortedOptions{Options: redisq.Options{TrustServer: true, ManualRequeue: true, MaxDeliveries: -1}})
	require.NoError(t, err)
	defer s.Close()
	for i := range 40 {
		_, err := q.Enqueue(ctx, []byte(fmt.Sprint("m", i)))
		require.NoError(t, err)
		require.NoError(t, s.Publish(ctx, int64(i), fmt.Sprint("k", i%10), []byte(fmt.Sprint("v", i))))
	}
	ms, err := q.DequeueBatch(ctx, 10)
	require.NoError(t, err)
	bs, err := s.TryPull(20)
	require.NoError(t, err)

	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "1").Err())
	_, err = q.Enqueue(ctx, []byte("refused"))
	require.ErrorContains(t, err, "OOM")
	_, err = q.TryDequeue()
	require.ErrorContains(t, err, "OOM")
	_, err = q.DequeueBatch(ctx, 5)
	require.ErrorContains(t, err, "OOM")
	require.ErrorContains(t, s.Publish(ctx, 99, "k0", []byte("refused")), "OOM")
	_, err = s.TryPull(5)
	require.ErrorContains(t, err, "OOM")
	require.NoError(t, ms[0].Ack())
	require.NoError(t, ms[1].Nack(0))
	require.NoError(t, ms[2].Nack(time.Hour))
	require.NoError(t, ms[3].DeadLetter("why"))
	require.NoError(t, bs[0].Ack())
	require.NoError(t, bs[1].Nack(0))
	require.NoError(t, bs[2].DeadLetter("why"))
	require.NoError(t, q.RequeueDead(ms[3].ID))
	n, err := s.RequeueAllDead()
	require.NoError(t, err)
	require.Equal(t, len(bs[2].Values), n)

	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "0").Err())
	seen := map[string]int{string(ms[0].Payload): 1}
	for _, m := range ms[4:] {
		seen[string(m.Payload)]++
		require.NoError(t, m.Ack())
	}
	for {
		m, err := q.TryDequeue()
		if err != nil {
			require.ErrorIs(t, err, queue.ErrEmpty)
			break
		}
		seen[string(m.Payload)]++
		require.NoError(t, m.Ack())
	}
	require.Equal(t, int64(1), q.Stats().Delayed, "the message nacked for an hour")
	require.Len(t, seen, 39)
	for p, c := range seen {
		require.Equal(t, 1, c, "message %s", p)
	}
	got := map[string]int{}
	for _, v := range bs[0].Values {
		got[string(v.Payload)]++
	}
	for _, b := range bs[3:] {
		for _, v := range b.Values {
			got[string(v.Payload)]++
		}
		require.NoError(t, b.Ack())
	}
	for {
		more, err := s.TryPull(100)
		if err != nil {
			require.ErrorIs(t, err, queue.ErrEmpty)
			break
		}
		for _, b := range more {
			for _, v := range b.Values {
				got[string(v.Payload)]++
			}
			require.NoError(t, b.Ack())
		}
	}
	require.Len(t, got, 40)
	for p, c := range got {
		require.Equal(t, 1, c, "value %s", p)
	}
	st := s.Stats()
	require.Zero(t, st.SortedPending+st.SortedLeased+st.SortedDead)
}
