package main_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// deadLetter enqueues payload with id into q and dead-letters it; it
// returns the dead letter's seq.
func deadLetter(t *testing.T, q *queue.Queue, id, payload string) uint64 {
	t.Helper()
	_, err := q.Enqueue(context.Background(), []byte(payload), queue.WithID(id))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, id, m.ID)
	require.NoError(t, m.DeadLetter("r"))
	return m.Receipt.Seq
}

// TestRemoteShowIDBeforeRef: dlq show --url took the first dead letter
// whose id or ref was the name given, so an id that is an older letter's
// ref showed that older letter, where the local form shows the letter
// with that id. A ref is taken only when no id matches.
func TestRemoteShowIDBeforeRef(t *testing.T) {
	q, url := runningService(t)
	seq := deadLetter(t, q, "b", "first")
	other := fmt.Sprintf("%d@b", seq) // the ref of the first letter
	seq2 := deadLetter(t, q, other, "second")
	tok := "Authorization: Bearer s3cret"
	remote := mustWalq(t, 0, "", "dlq", "show", "--url", url, "-H", tok, other).stdout
	byRef := walq(t, "", "dlq", "show", "--url", url, "-H", tok, fmt.Sprintf("%d@%s", seq2, other)).stdout
	require.NoError(t, q.Close())
	local := mustWalq(t, 0, "", "dlq", "show", q.Dir(), other).stdout
	assert.Contains(t, local, "second")
	assert.Equal(t, local, remote)
	assert.Equal(t, local, byRef, "a ref that no id matches names its letter")
}

// TestRemoteShowPastTheFirstPage: a letter beyond the dashboard's first
// page of the list (500) is found, as the local form finds it.
func TestRemoteShowPastTheFirstPage(t *testing.T) {
	q, url := runningService(t)
	for i := 0; i < 620; i++ {
		deadLetter(t, q, fmt.Sprintf("n-%d", i), fmt.Sprintf("p-%d", i))
	}
	tok := "Authorization: Bearer s3cret"
	far := mustWalq(t, 0, "", "dlq", "show", "--url", url, "-H", tok, "n-610").stdout
	require.NoError(t, q.Close())
	assert.Equal(t, mustWalq(t, 0, "", "dlq", "show", q.Dir(), "n-610").stdout, far)
}
