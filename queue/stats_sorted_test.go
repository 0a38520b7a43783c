package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// TestStatsSortedKeysAfterNackDelay: a key held back by a nack delay counts
// in SortedKeys again once the delay has passed, before any pull looks at
// it, as a delayed message counts as Ready once its time has come. Found by
// FuzzSortedModel: the hold ended only when a pull ran.
func TestStatsSortedKeysAfterNackDelay(t *testing.T) {
	clock := newFakeClock()
	o := queue.Options{Clock: clock, ManualRequeue: true, Sync: queue.SyncNever}
	for _, tc := range []struct {
		name   string
		reopen bool // the hold is replayed from the log rather than set live
	}{{"live", false}, {"replayed", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sq, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: o})
			require.NoError(t, err)
			defer func() { sq.Close() }()
			require.NoError(t, sq.Publish(context.Background(), 1, "k", []byte("v")))
			bs, err := sq.TryPull(10)
			require.NoError(t, err)
			require.NoError(t, bs[0].Nack(2*time.Second))
			require.Equal(t, 0, sq.Stats().SortedKeys, "held by the nack delay")
			if tc.reopen {
				require.NoError(t, sq.Close())
				sq, err = queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: o})
				require.NoError(t, err)
			}
			clock.Advance(2 * time.Second)
			st := sq.Stats()
			require.Equal(t, 1, st.SortedKeys, "the delay has passed: the key can be pulled now")
			require.Equal(t, 1, st.SortedPending)
			bs, err = sq.TryPull(10)
			require.NoError(t, err)
			require.Len(t, bs, 1)
		})
	}
}
