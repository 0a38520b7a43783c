package redisq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestSeqKeyLost: an operator deletes the sequence counter of a queue that
// holds messages (DEL, or an EXPIRE that ran out). The counter starts again
// at 1, and an enqueue given a seq that a live message holds would write
// over that message's record and body: the message lost, its id still
// naming the new one. The enqueue must fail instead, and every message
// stays as it was.
func TestSeqKeyLost(t *testing.T) {
	ctx := context.Background()
	seqKey := "walq:{seqlost}:2:seq"
	for _, c := range []struct {
		name    string
		enqueue func(q *redisq.Queue) error
	}{
		{"lone", func(q *redisq.Queue) error { _, err := q.Enqueue(ctx, []byte("new")); return err }},
		{"batch of generated ids", func(q *redisq.Queue) error {
			_, err := q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("new")}, {Payload: []byte("new")}})
			return err
		}},
		{"producer id", func(q *redisq.Queue) error {
			_, err := q.Enqueue(ctx, []byte("new"), queue.WithID("p-new"))
			return err
		}},
		{"delayed", func(q *redisq.Queue) error {
			_, err := q.Enqueue(ctx, []byte("new"), queue.WithDelay(time.Hour))
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client()
			q, err := redisq.Open(ctx, rdb, "seqlost", &redisq.Options{AckTimeout: time.Minute})
			require.NoError(t, err)
			defer q.Close()
			_, err = q.Enqueue(ctx, []byte("first"), queue.WithID("p-first"))
			require.NoError(t, err)
			_, err = q.Enqueue(ctx, []byte("second"))
			require.NoError(t, err)
			require.NoError(t, rdb.Del(ctx, seqKey).Err())

			err = c.enqueue(q)
			require.Error(t, err, "an enqueue after the counter was lost reused the seqs of live messages")
			require.ErrorIs(t, err, queue.ErrCorrupt)
			require.Contains(t, err.Error(), seqKey)

			// The counter is left at 0: the next enqueue is refused too,
			// until the operator sets it back.
			require.ErrorIs(t, c.enqueue(q), queue.ErrCorrupt)
			require.NoError(t, rdb.Set(ctx, seqKey, 2, 0).Err())
			require.NoError(t, c.enqueue(q))

			// Both messages are as they were, in order, then the new ones.
			for _, want := range []string{"first", "second"} {
				m, err := q.TryDequeue()
				require.NoError(t, err)
				require.Equal(t, want, string(m.Payload))
				require.NoError(t, m.Ack())
			}
			for {
				m, err := q.TryDequeue()
				if errors.Is(err, queue.ErrEmpty) {
					break
				}
				require.NoError(t, err)
				require.Equal(t, "new", string(m.Payload))
				require.NoError(t, m.Ack())
			}
		})
	}
}

// TestSortedSeqKeyLost: the same for a sorted queue, whose publish would
// write a new value over the stored value of the live one with its seq.
func TestSortedSeqKeyLost(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	s, err := redisq.OpenSorted[int64](ctx, rdb, "sseqlost", &redisq.SortedOptions{Options: redisq.Options{AckTimeout: time.Minute}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "a", []byte("first")))
	require.NoError(t, s.Publish(ctx, 2, "b", []byte("second")))
	seqKey := "walq:{sseqlost}:s:seq"
	n, err := rdb.Del(ctx, seqKey).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the counter's key")

	err = s.Publish(ctx, 3, "c", []byte("new"))
	require.Error(t, err, "a publish after the counter was lost reused the seq of a live value")
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.Contains(t, err.Error(), seqKey)
	require.ErrorIs(t, s.Publish(ctx, 3, "c", []byte("new")), queue.ErrCorrupt)
	require.NoError(t, rdb.Set(ctx, seqKey, 2, 0).Err())
	require.NoError(t, s.Publish(ctx, 3, "c", []byte("new")))

	got := map[string]string{}
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	for _, b := range bs {
		for _, m := range b.Values {
			got[b.Key] = string(m.Payload)
		}
		require.NoError(t, b.Ack())
	}
	require.Equal(t, map[string]string{"a": "first", "b": "second", "c": "new"}, got)
}
