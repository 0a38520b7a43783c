package queue_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// TestVerifyBoundaryRoll: a power loss during a segment roll keeps the new,
// empty segment and loses the sealed segment's last entry whole (the tear
// falls on an entry boundary). Open, given the writer's SegmentSize, cuts
// it as a torn roll: the segment is shorter than that size. Verify is
// given no SegmentSize and cannot tell this from a missing segment after
// a whole one; its report must say so rather than call it a missing
// segment; given SegmentSize it reports the torn roll, and Repair given
// the application's SegmentSize repairs it.
func TestVerifyBoundaryRoll(t *testing.T) {
	img := boundaryRollImage(t)
	opened := crashImage(t, img)
	q2 := open(t, opened, &queue.Options{SegmentSize: rollSegmentSize})
	torn := q2.Recovery().Log.Torn
	require.NoError(t, q2.Close())
	require.NotNil(t, torn, "Open given the writer's SegmentSize repairs the torn roll")

	_, err := queue.Verify(img, nil)
	require.ErrorIs(t, err, queue.ErrCorrupt, "Verify cannot tell it from a missing segment")
	require.ErrorContains(t, err, "cannot tell which", "Verify says what it cannot tell")
	require.ErrorContains(t, err, "SegmentSize", "and what tells it")

	// Verify given the writer's SegmentSize tells it, as Open does: a
	// torn tail, repairable.
	check, err := queue.Verify(img, &queue.VerifyOptions{SegmentSize: rollSegmentSize})
	require.NoError(t, err)
	require.NotNil(t, check.Log.Torn, "Verify given SegmentSize reports the torn roll")
	require.Contains(t, check.Log.Torn.Reason, "segment roll")
	_, err = queue.Verify(img, &queue.VerifyOptions{SegmentSize: 100})
	require.ErrorIs(t, err, queue.ErrInvalidOptions)

	// Repair given the application's SegmentSize tells it, as Open does.
	repaired := crashImage(t, img)
	rep, err := queue.Repair(repaired, &queue.RepairOptions{Options: &queue.Options{SegmentSize: rollSegmentSize}})
	require.NoError(t, err)
	require.True(t, rep.Repaired)
	require.NotNil(t, rep.Recovery.Log.Torn, "the torn roll is cut")
	_, err = queue.Verify(repaired, nil)
	require.NoError(t, err)
}
