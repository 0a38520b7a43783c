package queue_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
)

// Repair's salvage opened the queue through RepairOptions.Options.FS, but
// its checks, before and after, read the directory through the real file
// system: a fault test that failed a read through its FS saw the repair
// report a clean directory, and a repair judged a directory its salvage
// did not read. The checks now read through the same FS, and Verify
// through VerifyOptions.FS.
func TestVerifyAndRepairReadThroughFS(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, nil)
	_, err := q.Enqueue(context.Background(), []byte("x"))
	require.NoError(t, err)
	require.NoError(t, q.Close())

	t.Run("Repair", func(t *testing.T) {
		fs := faultfs.New(0)
		fs.FailNext("open")
		_, err := queue.Repair(dir, &queue.RepairOptions{Options: &queue.Options{FS: fs}})
		require.ErrorIs(t, err, faultfs.ErrInjected, "the check's first open fails through the FS")
		fs = faultfs.New(0)
		rep, err := queue.Repair(dir, &queue.RepairOptions{Options: &queue.Options{FS: fs}})
		require.NoError(t, err)
		require.True(t, rep.Before.Clean(), "%+v", rep.Before)
		require.NotEmpty(t, fs.Ops(), "the checks read through the FS")
	})
	t.Run("Verify", func(t *testing.T) {
		fs := faultfs.New(0)
		fs.FailNext("open")
		_, err := queue.Verify(dir, &queue.VerifyOptions{FS: fs})
		require.ErrorIs(t, err, faultfs.ErrInjected)
		fs = faultfs.New(0)
		c, err := queue.Verify(dir, &queue.VerifyOptions{FS: fs})
		require.NoError(t, err)
		require.True(t, c.Clean(), "%+v", c)
		require.NotEmpty(t, fs.Ops())
	})
}
