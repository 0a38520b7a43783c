package queue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// On a healthy log the poison check that settleLocked now makes first
// changes no answer: a settle whose receipts are all lost is a
// *BatchError of ErrLeaseLost at each index, and a call given nothing to
// do is nil.
func TestHealthySettleAnswersUnchanged(t *testing.T) {
	q := open(t, t.TempDir(), &queue.Options{ManualRequeue: true})
	defer q.Close()
	enqueue(t, q, "a")
	enqueue(t, q, "b")
	a, err := q.TryDequeue()
	require.NoError(t, err)
	b, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, a.Ack())
	require.NoError(t, b.Ack())
	err = q.AckBatch(a.Receipt, b.Receipt)
	var be *queue.BatchError
	require.True(t, errors.As(err, &be), "all lost: %v", err)
	require.Len(t, be.Errs, 2)
	for i := range be.Errs {
		require.ErrorIs(t, be.Errs[i], queue.ErrLeaseLost, "receipt %d", i)
	}
	require.NoError(t, q.Settle())
	p, err := q.SettleAsync()
	require.NoError(t, err)
	require.Nil(t, p)
	require.NoError(t, q.ExtendBatch(0))
	ids, err := q.EnqueueBatch(context.Background(), nil)
	require.NoError(t, err)
	require.Empty(t, ids)
}
