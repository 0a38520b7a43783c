package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestSortedWindowedForm: a windowed queue refuses a sorted handle of its
// sort key type (time.Time), which would pull keys before their window
// closes, and a sorted queue of time.Time keys refuses a windowed handle,
// as the embedded queue refuses to open one kind as the other
// (queue.ErrWrongKind there, queue.ErrInvalidOptions here); handles of
// the queue's own form go on. A queue made before the form was recorded
// takes either.
func TestSortedWindowedForm(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	clock := queuetest.NewClock()
	opts := redisq.SortedOptions{Options: redisq.Options{Clock: clock, ManualRequeue: true}}
	w, err := redisq.OpenWindowed(ctx, rdb, "form-w", &redisq.WindowOptions{SortedOptions: opts, Window: time.Hour})
	require.NoError(t, err)
	defer w.Close()
	require.NoError(t, w.Publish(ctx, "k", []byte("v")))
	_, err = redisq.OpenSorted[time.Time](ctx, rdb, "form-w", &opts)
	require.ErrorIs(t, err, queue.ErrInvalidOptions, "a sorted handle would pull k within its window")
	_, err = w.TryPull(10)
	require.ErrorIs(t, err, queue.ErrEmpty)
	w2, err := redisq.OpenWindowed(ctx, rdb, "form-w", &redisq.WindowOptions{SortedOptions: opts, Window: time.Hour})
	require.NoError(t, err)
	require.NoError(t, w2.Close())

	s, err := redisq.OpenSorted[time.Time](ctx, rdb, "form-s", &opts)
	require.NoError(t, err)
	defer s.Close()
	_, err = redisq.OpenWindowed(ctx, rdb, "form-s", &redisq.WindowOptions{SortedOptions: opts, Window: time.Hour})
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
	s2, err := redisq.OpenSorted[time.Time](ctx, rdb, "form-s", &opts)
	require.NoError(t, err)
	require.NoError(t, s2.Close())

	require.NoError(t, rdb.HDel(ctx, "walq:{form-w}:s:stats", "form").Err()) // as a queue of an earlier version
	old, err := redisq.OpenSorted[time.Time](ctx, rdb, "form-w", &opts)
	require.NoError(t, err, "a queue that records no form takes either")
	require.NoError(t, old.Close())
}
