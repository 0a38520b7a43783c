package redisq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestSortedKillServer kills redis-server (SIGKILL, appendfsync always)
// between pulls and their settles: after the restart on its files every
// publish and settle that returned holds, a batch pulled before the kill
// is still leased to its receipt (its ack succeeds once), a batch nacked
// before the kill is pullable again with its delivery counted, and an
// expired lease gives its key back whole.
func TestSortedKillServer(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer rdb.Close()
	ctx := context.Background()
	open := func(c queue.Clock) *redisq.Sorted[int64] {
		s, err := redisq.OpenSorted[int64](ctx, rdb, "kill",
			&redisq.SortedOptions{Options: redisq.Options{AckTimeout: time.Minute, ManualRequeue: true, Clock: c}})
		require.NoError(t, err)
		return s
	}
	s := open(nil)
	for i := range 8 {
		require.NoError(t, s.Publish(ctx, int64(i), fmt.Sprint("k", i%4), []byte(fmt.Sprint(i))))
	}
	bs, err := s.TryPull(4) // k0 {0 4}, k1 {1 5}
	require.NoError(t, err)
	require.Len(t, bs, 2)
	require.NoError(t, bs[0].Ack())
	require.NoError(t, bs[1].Nack(0))
	held, err := s.TryPull(2) // k1 again, its second delivery
	require.NoError(t, err)
	require.Len(t, held, 1)
	require.Equal(t, "k1", held[0].Key)
	lost, err := s.TryPull(2) // k2 {2 6}, left to expire
	require.NoError(t, err)
	require.Len(t, lost, 1)
	srv.Kill()
	_ = s.Close()

	srv.Restart()
	s2 := open(nil)
	defer s2.Close()
	require.NoError(t, s2.Ack(held[0].Receipt), "a lease pulled before the kill survives it")
	require.ErrorIs(t, s2.Ack(held[0].Receipt), queue.ErrLeaseLost)
	require.ErrorIs(t, s2.Ack(bs[0].Receipt), queue.ErrLeaseLost, "the ack before the kill survives it")
	st := s2.Stats()
	require.Equal(t, 2, st.SortedPending, "k3's values")
	require.Equal(t, 1, st.SortedBatches, "k2's")

	later := open(&shiftedClock{d: time.Hour})
	defer later.Close()
	n, err := later.RequeueExpired()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got, err := later.TryPull(100)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, []string{"k2", "k3"}, []string{got[0].Key, got[1].Key})
	require.Len(t, got[0].Values, 2)
	require.Equal(t, 2, got[0].Values[0].Deliveries)
	for _, b := range got {
		require.NoError(t, b.Ack())
	}
	_, err = later.TryPull(100)
	require.True(t, errors.Is(err, queue.ErrEmpty))
}
