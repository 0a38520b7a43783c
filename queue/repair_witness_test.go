package queue_test

import (
	"context"
	"encoding/binary"
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
	for deadline := time.Now().Add(10 * time.Second); !endsInWitness(t, last) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	require.True(t, endsInWitness(t, last), "no witness after 10 s of an idle queue")
	require.NoError(t, q.Close())
	require.True(t, endsInWitness(t, last), "the log ends in a witness")
	fi, err := os.Stat(last)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(last, fi.Size()-3)) // into the witness's Synced LSN
	rep, err := queue.Repair(dir, nil)
	require.NoError(t, err)
	require.NotNil(t, rep.Recovery.Log.Torn, "the torn witness is cut")
	require.Empty(t, rep.LostLSNs(), "a witness holds no message: %v", rep.Recovery.Log.Torn)
}

// endsInWitness reports whether the last whole entry of the segment at
// path holds no record (a witness) and follows one that does. Zeros
// written ahead of the tail end the walk, as they end an Open's.
func endsInWitness(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	sawRecords, lastCount := false, uint32(0)
	for off := 0; off < len(b); {
		n, k := binary.Uvarint(b[off:])
		if k <= 0 || n < 17 || off+k+int(n) > len(b) {
			break
		}
		lastCount = binary.LittleEndian.Uint32(b[off+k+13:])
		sawRecords = sawRecords || lastCount > 0
		off += k + int(n)
	}
	return sawRecords && lastCount == 0
}
