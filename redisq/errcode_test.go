package redisq_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestErrorsByCodeNotText: a call's error is told by the code its reply
// starts with, never by words found anywhere in its text. A retried
// EnqueueBatch whose id holds "KEYTYPE " is refused as a duplicate, as
// any other (the producer learns the batch went in), and a key of the
// wrong type of a queue whose name holds "DUPLICATE" fails an enqueue
// with an error naming that key, never ErrDuplicate (which a producer
// takes for "enqueued before", and drops the message); a sorted queue
// whose name holds "KEYTYPE " likewise.
func TestErrorsByCodeNotText(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()

	t.Run("IDHoldsKEYTYPE", func(t *testing.T) {
		q, err := redisq.Open(ctx, rdb, "codes-id", nil)
		require.NoError(t, err)
		defer q.Close()
		items := []queue.Item{{ID: "KEYTYPE order-1", Payload: []byte("x")}}
		_, err = q.EnqueueBatch(ctx, items)
		require.NoError(t, err)
		_, err = q.EnqueueBatch(ctx, items)
		require.ErrorIs(t, err, queue.ErrDuplicate, "a retried batch")
		require.NotErrorIs(t, err, queue.ErrInvalidOptions)
	})

	t.Run("NameHoldsDUPLICATE", func(t *testing.T) {
		q, err := redisq.Open(ctx, rdb, "NO_DUPLICATES", nil)
		require.NoError(t, err)
		defer q.Close()
		_, err = q.Enqueue(ctx, []byte("first"))
		require.NoError(t, err)
		const ready = "walq:{NO_DUPLICATES}:2:ready"
		require.NoError(t, rdb.Rename(ctx, ready, "saved").Err())
		require.NoError(t, rdb.Set(ctx, ready, "by hand", 0).Err())
		for _, enqueue := range []func() error{
			func() error { _, err := q.Enqueue(ctx, []byte("x")); return err },
			func() error { _, err := q.Enqueue(ctx, []byte("x"), queue.WithID("id-1")); return err },
			func() error { _, err := q.EnqueueBatch(ctx, []queue.Item{{ID: "id-2"}, {ID: "id-3"}}); return err },
		} {
			err := enqueue()
			require.Error(t, err)
			require.NotErrorIs(t, err, queue.ErrDuplicate)
			require.ErrorContains(t, err, ready)
		}
		require.NoError(t, rdb.Rename(ctx, "saved", ready).Err())
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.Equal(t, "first", string(m.Payload))
		require.NoError(t, m.Ack())
		_, err = q.Enqueue(ctx, []byte("x"), queue.WithID("id-1"))
		require.NoError(t, err, "the refused enqueue of id-1 wrote nothing")
	})

	t.Run("SortedNameHoldsKEYTYPE", func(t *testing.T) {
		s, err := redisq.OpenSorted[int64](ctx, rdb, "KEYTYPE s", &redisq.SortedOptions{Options: redisq.Options{ManualRequeue: true}})
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, s.Publish(ctx, 1, "a", []byte("x")))
		const order = "walq:{KEYTYPE s}:s:order"
		require.NoError(t, rdb.Rename(ctx, order, "saved-order").Err())
		require.NoError(t, rdb.Set(ctx, order, "by hand", 0).Err())
		_, err = s.TryPull(10)
		require.Error(t, err)
		require.NotErrorIs(t, err, queue.ErrInvalidOptions, "a key of the wrong type is no handle of another sort key type")
		require.ErrorContains(t, err, order)
		require.NoError(t, rdb.Rename(ctx, "saved-order", order).Err())
		bs, err := s.TryPull(10)
		require.NoError(t, err)
		require.Len(t, bs, 1)
		require.NoError(t, bs[0].Ack())
	})
}
