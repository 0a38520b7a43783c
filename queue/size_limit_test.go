package queue_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// Messages up to MaxMessageSize, 4 MiB by default, are accepted and
// delivered whole, also across a reopen (a record larger than the
// default segment); one byte more is ErrTooLarge from every enqueue and
// publish, and nothing of a refused batch is enqueued.
func TestMaxMessageSizeDefault(t *testing.T) {
	ctx := context.Background()
	limit := bytes.Repeat([]byte{'x'}, 4<<20)
	over := append(bytes.Clone(limit), 'y')
	dir := t.TempDir()
	q := open(t, dir, nil)
	_, err := q.Enqueue(ctx, over)
	require.ErrorIs(t, err, queue.ErrTooLarge, "Enqueue")
	_, err = q.EnqueueAsync(ctx, over)
	require.ErrorIs(t, err, queue.ErrTooLarge, "EnqueueAsync")
	_, err = q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("small")}, {Payload: over}})
	require.ErrorIs(t, err, queue.ErrTooLarge, "EnqueueBatch")
	requireEmpty(t, q)
	enqueue(t, q, string(limit))
	require.NoError(t, q.Close())

	q = open(t, dir, nil)
	defer q.Close()
	m := tryDequeue(t, q)
	require.True(t, bytes.Equal(limit, m.Payload), "the 4 MiB message delivered whole after a reopen")
	require.NoError(t, m.Ack())
	requireEmpty(t, q)

	s, err := queue.OpenSorted[int64](t.TempDir(), nil)
	require.NoError(t, err)
	defer s.Close()
	require.ErrorIs(t, s.Publish(ctx, 1, "k", over), queue.ErrTooLarge, "sorted Publish")
	require.NoError(t, s.Publish(ctx, 1, "k", limit))
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.True(t, bytes.Equal(limit, bs[0].Values[0].Payload))
}
