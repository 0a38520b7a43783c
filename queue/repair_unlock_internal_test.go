package queue

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// errUnlockInjected is the failure TestRepairReportsUnlockFailure injects
// into the release of the directory's lock.
var errUnlockInjected = errors.New("injected unlock failure")

// TestRepairReportsUnlockFailure: a failure to release the directory's
// lock at the end of Repair reaches the caller, joined with what Repair
// returns otherwise, whether the directory was clean, repaired, or the
// repair failed: a caller told all went well would take the directory
// for free while it may still be locked.
func TestRepairReportsUnlockFailure(t *testing.T) {
	for _, tc := range []struct {
		name     string
		damage   func(t *testing.T, dir string) // makes dir need a repair; nil: clean
		backup   error                          // Backup's error; nil: none
		repaired bool                           // the salvage runs
	}{
		{"clean", nil, nil, false},
		{"repaired", tornTail, nil, true},
		{"failed", tornTail, errors.New("backup refused"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			q, err := Open(dir, nil)
			require.NoError(t, err)
			_, err = q.Enqueue(context.Background(), []byte("kept"))
			require.NoError(t, err)
			require.NoError(t, q.Close())
			if tc.damage != nil {
				tc.damage(t, dir)
			}
			released := false
			release := func(l *dirLock) error {
				released = true
				return errors.Join(unlockDir(l), errUnlockInjected)
			}
			opts := &RepairOptions{}
			if tc.backup != nil {
				opts.Backup = func() error { return tc.backup }
			}
			rep, err := repair(dir, opts, release)
			require.Equal(t, tc.repaired, rep.Repaired)
			require.True(t, released, "Repair released the lock through its seam")
			require.ErrorIs(t, err, errUnlockInjected)
			if tc.backup != nil {
				require.ErrorIs(t, err, tc.backup, "the repair's own failure is kept beside the unlock's")
			}
		})
	}
}

// tornTail appends bytes that are no record to the log's last segment.
func tornTail(t *testing.T, dir string) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "log", "0*"))
	require.NoError(t, err)
	require.NotEmpty(t, segs)
	f, err := os.OpenFile(segs[len(segs)-1], os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte("a torn tail, not a record"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
}
