package queue_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// TestReadOnlyBoundaryRoll: a read-only Open of a roll torn on an entry
// boundary (boundaryRollImage), not given SegmentSize, says what Verify
// says, that it cannot tell the state from a missing segment
// (wal.ErrSegmentSizeUnknown), and advises neither 'walq repair' nor
// Options.Salvage, which refuse it too; given the writer's SegmentSize it
// opens and reports the torn roll, as Open would cut it.
func TestReadOnlyBoundaryRoll(t *testing.T) {
	img := boundaryRollImage(t)
	_, err := queue.Open(img, &queue.Options{ReadOnly: true})
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.ErrorIs(t, err, wal.ErrSegmentSizeUnknown)
	require.ErrorContains(t, err, "cannot tell which")
	require.NotContains(t, err.Error(), "walq repair", "it advises a repair that refuses the same state")
	require.NotContains(t, err.Error(), "Options.Salvage", "it advises a salvage that refuses the same state")

	q, err := queue.Open(img, &queue.Options{ReadOnly: true, SegmentSize: rollSegmentSize})
	require.NoError(t, err)
	torn := q.Recovery().Log.Torn
	require.NoError(t, q.Close())
	require.NotNil(t, torn, "the read-only open reports the torn roll")
	require.Contains(t, torn.Reason, "segment roll")
}
