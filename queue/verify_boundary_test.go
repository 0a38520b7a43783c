package queue_test

import (
	"encoding/binary"
	"fmt"
	"os"
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
// segment, and Repair given the application's SegmentSize repairs it.
func TestVerifyBoundaryRoll(t *testing.T) {
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
	last := 0 // offset of the last frame
	for off := 0; off < len(b); {
		n, k := binary.Uvarint(b[off:])
		require.Positive(t, k)
		last, off = off, off+k+int(n)
	}
	require.NoError(t, os.Truncate(sealed, int64(last))) // the last entry lost whole
	require.NoError(t, os.Truncate(tail, 0))

	opened := crashImage(t, img)
	q2 := open(t, opened, &queue.Options{SegmentSize: 4096})
	torn := q2.Recovery().Log.Torn
	require.NoError(t, q2.Close())
	require.NotNil(t, torn, "Open given the writer's SegmentSize repairs the torn roll")

	_, err = queue.Verify(img)
	require.ErrorIs(t, err, queue.ErrCorrupt, "Verify cannot tell it from a missing segment")
	require.ErrorContains(t, err, "cannot tell which", "Verify says what it cannot tell")
	require.ErrorContains(t, err, "SegmentSize", "and what tells it")

	// Repair given the application's SegmentSize tells it, as Open does.
	repaired := crashImage(t, img)
	rep, err := queue.Repair(repaired, &queue.RepairOptions{Options: &queue.Options{SegmentSize: 4096}})
	require.NoError(t, err)
	require.True(t, rep.Repaired)
	require.NotNil(t, rep.Recovery.Log.Torn, "the torn roll is cut")
	_, err = queue.Verify(repaired)
	require.NoError(t, err)
}
