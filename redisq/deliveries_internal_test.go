package redisq

import (
	"context"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestDeliveriesPastInt32: a delivery count past 2^31 on the server reads
// as itself where int holds it, and as math.MaxInt where int has 32 bits
// (GOARCH=386, arm): never wrapped to a negative or small count, and a
// dead letter's record that carries it is no corrupt one.
func TestDeliveriesPastInt32(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	q, err := Open(ctx, rdb, "deliveries-past-int32", &Options{MaxDeliveries: -1})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("x"), queue.WithID("big"))
	require.NoError(t, err)
	const had = int64(1)<<31 + 5 // deliveries before the next one
	rec := "1:" + strconv.FormatInt(had, 10) + "::3:big"
	require.NoError(t, rdb.HSet(ctx, q.keys[1], "1", rec).Err())

	want := int64(min(had+1, math.MaxInt))
	takes := []struct {
		name string
		take func() (*queue.Message, error)
	}{
		{"one", q.TryDequeue}, // the lease1 function
		{"batch", func() (*queue.Message, error) { // the dequeue function
			ms, err := q.DequeueBatch(ctx, 2)
			if err != nil || len(ms) == 0 {
				return nil, err
			}
			return ms[0], nil
		}},
	}
	for _, tk := range takes {
		m, err := tk.take()
		require.NoError(t, err, tk.name)
		require.NotNil(t, m, tk.name)
		require.Equal(t, want, int64(m.Deliveries), tk.name)
		require.NoError(t, m.Nack(0))
		want = int64(min(had+2, math.MaxInt))
	}

	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("done"))
	dead, err := q.DeadLetters(0, 0)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "done", dead[0].Reason)
	require.Equal(t, int64(min(had+3, math.MaxInt)), int64(dead[0].Deliveries))
}

// TestSortedDeliveriesPastInt32: as TestDeliveriesPastInt32, for a sorted
// queue's values and dead values.
func TestSortedDeliveriesPastInt32(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s, err := OpenSorted[int64](ctx, rdb, "sorted-deliveries-past-int32",
		&SortedOptions{Options: Options{MaxDeliveries: -1, ManualRequeue: true}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "k", []byte("v")))
	const had = int64(1)<<31 + 5 // deliveries before the next one
	require.NoError(t, rdb.HSet(ctx, s.keys[2], "1", had).Err())

	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.Len(t, bs[0].Values, 1)
	require.Equal(t, int64(min(had+1, math.MaxInt)), int64(bs[0].Values[0].Deliveries))
	require.NoError(t, bs[0].DeadLetter("done"))
	dead, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "done", dead[0].Reason)
	require.Equal(t, int64(min(had+1, math.MaxInt)), int64(dead[0].Deliveries))
}
