package redisq_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestReplicasReadsDoNotWait: Options.Replicas makes every change wait
// for the replicas; a read changes nothing, so it neither waits nor fails
// with ErrNotDurable when they are short (Stats, which drops the error,
// read zero counts).
func TestReplicasReadsDoNotWait(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	o := shortWait()
	q, err := redisq.Open(ctx, srv.Client(), "nd-read", &o)
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("a"))
	require.ErrorIs(t, err, redisq.ErrNotDurable)
	st, err := q.StatsContext(ctx)
	require.NoError(t, err, "Stats of the ack queue")
	require.EqualValues(t, 1, st.Ready)
	require.EqualValues(t, 1, q.Stats().Ready)
	_, err = q.DeadLetters(0, 10)
	require.NoError(t, err, "DeadLetters")

	s, err := redisq.OpenSorted[int64](ctx, srv.Client(), "nd-read-sorted", &redisq.SortedOptions{Options: shortWait()})
	require.NoError(t, err)
	defer s.Close()
	require.ErrorIs(t, s.Publish(ctx, 1, "k", []byte("v")), redisq.ErrNotDurable)
	sst, err := s.StatsContext(ctx)
	require.NoError(t, err, "Stats of the sorted queue")
	require.EqualValues(t, 1, sst.SortedPending)
	_, err = s.DeadValues(0, 10)
	require.NoError(t, err, "DeadValues")
}
