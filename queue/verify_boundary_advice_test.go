package queue_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// TestVerifyBoundaryRollAdvice: Verify of a roll torn on an entry boundary
// (see TestVerifyBoundaryRoll) cannot tell it from a missing segment and
// says that the writer's SegmentSize tells. Its advice must not then send
// the operator to 'walq repair' or Options.Salvage, which are given no
// SegmentSize and refuse the same state; Repair refuses it before its backup.
func TestVerifyBoundaryRollAdvice(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{SegmentSize: 4096})
	for i := 0; i < 120; i++ {
		enqueue(t, q, fmt.Sprintf("message %03d", i))
	}
	img := crashImage(t, dir)
	require.NoError(t, q.Close())
	segs := segments(t, img)
	require.GreaterOrEqual(t, len(segs), 2)
	sealed, tail := segs[len(segs)-2], segs[len(segs)-1]
	b, err := os.ReadFile(sealed)
	require.NoError(t, err)
	last := 0
	for off := 0; off < len(b); {
		n, k := binary.Uvarint(b[off:])
		require.Positive(t, k)
		last, off = off, off+k+int(n)
	}
	require.NoError(t, os.Truncate(sealed, int64(last)))
	require.NoError(t, os.Truncate(tail, 0))

	_, verr := queue.Verify(img)
	require.ErrorContains(t, verr, "cannot tell which")
	require.ErrorIs(t, verr, wal.ErrSegmentSizeUnknown)
	backedUp := false
	_, rerr := queue.Repair(crashImage(t, img), &queue.RepairOptions{ // what 'walq repair' runs
		Backup: func() error { backedUp = true; return nil }})
	require.ErrorIs(t, rerr, wal.ErrSegmentSizeUnknown)
	require.False(t, backedUp, "Repair made a backup of a directory it then refused")
	require.NotContains(t, verr.Error(), "run 'walq repair", "Verify advises a repair that refuses it: %v", rerr)
	_, serr := queue.Open(crashImage(t, img), &queue.Options{Salvage: true})
	require.ErrorIs(t, serr, wal.ErrSegmentSizeUnknown)
	require.NotContains(t, verr.Error(), "open with Options.Salvage", "Verify advises a salvage that refuses it: %v", serr)
}
