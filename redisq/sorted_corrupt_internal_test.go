package redisq

import (
	"context"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestSortedCorruptValue: a pulled batch holding a value whose body does
// not decode is dead-lettered whole (a batch is settled whole), with a
// reason saying its record is corrupt; the other batches of the pull
// are delivered. Without that the pull failed while its batches stayed
// leased, and failed again at every redelivery.
func TestSortedCorruptValue(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s, err := OpenSorted[int64](ctx, rdb, "corrupt-sorted", &SortedOptions{Options: Options{ManualRequeue: true}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "k1", []byte("a")))
	require.NoError(t, s.Publish(ctx, 2, "k2", []byte("b")))
	require.NoError(t, rdb.HSet(ctx, s.keys[1], "1", "\xc1").Err())

	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.Equal(t, "k2", bs[0].Key)
	require.NoError(t, bs[0].Ack())
	st := s.Stats()
	require.Equal(t, [3]int{0, 0, 1}, [3]int{st.SortedPending, st.SortedBatches, st.SortedDead})
	why, err := rdb.HGet(ctx, s.keys[3], "1").Result()
	require.NoError(t, err)
	require.Contains(t, why, "corrupt record: value 1 undecodable")
}

// TestSortedCorruptInfo: a batch whose value lost its delivery count is
// given back (nack, expiry) without failing halfway: that value goes to
// the dead set, the others back to their key; and a batch whose own
// record is gone or garbled stops no housekeeping pass.
func TestSortedCorruptInfo(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	clock := queuetest.NewClock()
	s, err := OpenSorted[int64](ctx, rdb, "corrupt-info", &SortedOptions{Options: Options{Clock: clock, AckTimeout: time.Minute, ManualRequeue: true}})
	require.NoError(t, err)
	defer s.Close()
	for i, k := range []string{"k1", "k1", "k2", "k3"} {
		require.NoError(t, s.Publish(ctx, int64(i), k, []byte(k)))
	}
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 3)
	require.NoError(t, rdb.HDel(ctx, s.keys[2], "1").Err())
	require.NoError(t, bs[0].Nack(0), "the nack of k1's batch")
	st := s.Stats()
	require.Equal(t, [2]int{1, 1}, [2]int{st.SortedPending, st.SortedDead}, "value 1 dead, value 2 pending again")

	require.NoError(t, rdb.HSet(ctx, s.keys[7], strconv.FormatUint(bs[1].Receipt.Lease, 10), "\xc1").Err())
	clock.Advance(2 * time.Minute)
	n, err := s.RequeueExpired()
	require.NoError(t, err)
	require.Equal(t, 2, n)
	bs, err = s.TryPull(10)
	require.NoError(t, err)
	var keys []string
	for _, b := range bs {
		keys = append(keys, b.Key)
	}
	sort.Strings(keys)
	require.Equal(t, []string{"k1", "k3"}, keys, "k3's lease ended and its value is back")
}
