package queue_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// TestRepairTornWitnessLosesNothing: an idle queue's log ends in a
// witness (wal/witness.go), an entry of no record written without an
// fsync, which a power loss can tear. The repair cuts it, and must not
// list its LSN among the lost ones: no message had it.
func TestRepairTornWitnessLosesNothing(t *testing.T) {
	dir := t.TempDir()
	q, err := queue.Open(dir, nil)
	require.NoError(t, err)
	for i := range 2 {
		_, err := q.Enqueue(context.Background(), []byte{byte('a' + i)})
		require.NoError(t, err)
	}
	segs := logSegments(t, dir)
	last := segs[len(segs)-1]
	witnessed := func() bool {
		fi, err := os.Stat(last)
		require.NoError(t, err)
		return fi.Size() > lastRecordEnd(t, last)
	}
	for deadline := time.Now().Add(10 * time.Second); !witnessed() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	require.True(t, witnessed(), "no witness after 10 s")
	require.NoError(t, q.Close())
	fi, err := os.Stat(last)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(last, fi.Size()-3)) // into the witness's Synced LSN
	rep, err := queue.Repair(dir, nil)
	require.NoError(t, err)
	require.NotNil(t, rep.Recovery.Log.Torn, "the torn witness is cut")
	require.Empty(t, rep.LostLSNs(), "a witness holds no message: %v", rep.Recovery.Log.Torn)
}
