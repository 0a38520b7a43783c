package main_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestPoisonDeadAfterLimitWithStartHook: a poison message kills its
// consumer at every delivery, and the service runs `walq compact DIR`
// before each start (a start-up hook), whose open ends the crashed
// consumer's lease without applying a delivery limit. The application's
// MaxDeliveries of 3 still holds: the poison is delivered 3 times, then
// dead-lettered with 3 deliveries instead of being delivered again.
func TestPoisonDeadAfterLimitWithStartHook(t *testing.T) {
	o := &queue.Options{MaxDeliveries: 3, AckTimeout: time.Minute, SegmentSize: 4096}
	dir := filepath.Join(t.TempDir(), "q")
	q, err := queue.Open(dir, o)
	require.NoError(t, err)
	_, err = q.Enqueue(context.Background(), []byte("poison"))
	require.NoError(t, err)
	require.NoError(t, q.Close())
	for round := 1; round <= 15; round++ {
		mustWalq(t, 0, "", "compact", dir) // the start-up hook
		q, err := queue.Open(dir, o)
		require.NoError(t, err)
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			dead, derr := q.DeadLetters(0, 0)
			require.NoError(t, derr)
			require.NoError(t, q.Close())
			require.Len(t, dead, 1)
			require.Equal(t, 3, dead[0].Deliveries)
			require.Equal(t, 4, round, "dead after %d crashes, not 3", round-1)
			return
		}
		require.NoError(t, err, "round %d", round)
		require.Equal(t, round, m.Deliveries)
		image := filepath.Join(t.TempDir(), "q") // kill -9 while the consumer holds it
		copyTree(t, dir, image)
		require.NoError(t, q.Close())
		dir = image
	}
	t.Fatalf("the poison message was delivered 15 times under MaxDeliveries 3 and never dead-lettered")
}
