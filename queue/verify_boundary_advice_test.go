package queue_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// TestVerifyBoundaryRollAdvice: Verify of a roll torn on an entry boundary
// (boundaryRollImage) cannot tell it from a missing segment and
// says that the writer's SegmentSize tells. Its advice must not then send
// the operator to 'walq repair' or Options.Salvage, which are given no
// SegmentSize and refuse the same state; Repair refuses it before its backup.
func TestVerifyBoundaryRollAdvice(t *testing.T) {
	img := boundaryRollImage(t)
	_, verr := queue.Verify(img, nil)
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
