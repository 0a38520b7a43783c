package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSleeperThatLeftIsForgotten: a blocked Dequeue that gives up (its
// context ends) leaves no due time behind: the housekeeper does not go on
// re-checking the clock, once a second for an hour, for no one.
func TestSleeperThatLeftIsForgotten(t *testing.T) {
	q, err := Open(t.TempDir(), &Options{ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(context.Background(), []byte("x"), WithDelay(time.Hour))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = q.Dequeue(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, time.Duration(-1), q.wakeSleepers(), "no blocked call is left to wake")
	q.mu.Lock()
	defer q.mu.Unlock()
	require.Zero(t, q.mu.sleepUntil)
}
