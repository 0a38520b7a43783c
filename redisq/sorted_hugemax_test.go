package redisq_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestSortedPullNoLimit: a pull whose max is beyond any backlog
// (math.MaxInt, "everything") takes every pullable key, each whole, in
// order, as queue.Sorted does, also past the batches one call of the
// server's function leases: the handle draws lease tokens for the
// batches it may lease, not one per value max allows.
func TestSortedPullNoLimit(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := redisq.OpenSorted[int64](ctx, srv.Client(), "huge",
		&redisq.SortedOptions{Options: redisq.Options{ManualRequeue: true, AckTimeout: time.Hour}}) // thousands of acks may take minutes
	require.NoError(t, err)
	defer s.Close()
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			require.NoError(t, s.Publish(ctx, int64(i), fmt.Sprintf("k%05d", i), []byte{byte(i)}))
		}
	}
	check := func(bs []*queue.Batch[int64], from, to int) {
		t.Helper()
		require.Len(t, bs, to-from)
		for i, b := range bs {
			require.Equal(t, fmt.Sprintf("k%05d", from+i), b.Key)
			require.Equal(t, int64(from+i), b.Values[0].Sort)
			require.NoError(t, b.Ack())
		}
	}
	const keys = 2500 // more batches than one call of the function leases
	publish(0, keys)
	require.NoError(t, s.Publish(ctx, keys, "k00000", []byte("second")))
	bs, err := s.TryPull(math.MaxInt)
	require.NoError(t, err)
	check(bs, 0, keys)
	require.Len(t, bs[0].Values, 2, "a key is pulled whole")

	publish(keys, keys+3)
	bs, err = s.Pull(ctx, math.MaxInt)
	require.NoError(t, err)
	check(bs, keys, keys+3)
	st := s.Stats()
	require.Zero(t, st.SortedPending)
	require.Zero(t, st.SortedBatches)
}

// TestSortedPullMaxCountsValues: a Pull's max counts values, not
// batches, across the calls it makes past the 1000 batches of one call:
// with keys of two values each, a max of 2500 takes 1250 whole keys (the
// first call 1000 keys, 2000 values; the second the 500 values left),
// not 1750 (the second call taking 1500 more values).
func TestSortedPullMaxCountsValues(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := redisq.OpenSorted[int64](ctx, srv.Client(), "maxvalues",
		&redisq.SortedOptions{Options: redisq.Options{ManualRequeue: true, AckTimeout: time.Hour}}) // thousands of acks may take minutes
	require.NoError(t, err)
	defer s.Close()
	const keys, max = 2000, 2500
	for i := range keys {
		for j := range 2 {
			require.NoError(t, s.Publish(ctx, int64(2*i+j), fmt.Sprintf("k%05d", i), []byte{byte(j)}))
		}
	}
	bs, err := s.Pull(ctx, max)
	require.NoError(t, err)
	values := 0
	for i, b := range bs {
		require.Equal(t, fmt.Sprintf("k%05d", i), b.Key)
		require.Len(t, b.Values, 2, "a key is pulled whole")
		values += len(b.Values)
	}
	require.Equal(t, max, values)
	require.Len(t, bs, max/2)
	st := s.Stats()
	require.Equal(t, 2*keys-max, st.SortedPending)
	require.Equal(t, max, st.SortedLeased)
}
