package queue_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// TestVerifySizeUnknownByKind: Check.SizeUnknown reports the log open's
// refusal that wraps wal.ErrSegmentSizeUnknown (boundaryRollImage), and
// nothing else, whatever a problem's text holds: a damaged snapshot in a
// directory whose path spells the sentinel's text is damage a repair
// fixes, and Repair, not given SegmentSize, must not refuse it as a state
// that only the writer's segment size settles.
func TestVerifySizeUnknownByKind(t *testing.T) {
	check, err := queue.Verify(boundaryRollImage(t), nil)
	require.ErrorIs(t, err, wal.ErrSegmentSizeUnknown)
	require.True(t, check.SizeUnknown(), "the torn roll's refusal: %v", err)

	dir := filepath.Join(t.TempDir(), wal.ErrSegmentSizeUnknown.Error())
	q := open(t, dir, nil)
	enqueue(t, q, "a")
	require.NoError(t, q.Compact())
	require.NoError(t, q.Close())
	snaps, err := filepath.Glob(filepath.Join(dir, "snapshot-*.snap"))
	require.NoError(t, err)
	require.NotEmpty(t, snaps)
	b, err := os.ReadFile(snaps[len(snaps)-1])
	require.NoError(t, err)
	b[len(b)-1] ^= 0xff
	require.NoError(t, os.WriteFile(snaps[len(snaps)-1], b, 0o600))

	check, err = queue.Verify(dir, nil)
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.Len(t, check.Problems, 1, "the damaged snapshot")
	require.False(t, check.SizeUnknown(), "a damaged snapshot taken for a torn roll: %s", check.Problems[0])
	require.NotErrorIs(t, err, wal.ErrSegmentSizeUnknown)
	_, err = queue.Repair(dir, nil)
	require.NoError(t, err, "Repair refuses a damaged snapshot")
}
