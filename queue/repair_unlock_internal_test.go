package queue

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/wal"
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
			dir := closedQueueDir(t)
			if tc.damage != nil {
				tc.damage(t, dir)
			}
			release, released := failingRelease()
			opts := &RepairOptions{}
			if tc.backup != nil {
				opts.Backup = func() error { return tc.backup }
			}
			rep, err := repair(dir, opts, release)
			require.Equal(t, tc.repaired, rep.Repaired)
			require.True(t, *released, "Repair released the lock through its seam")
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

// failingRelease returns a release of the directory's lock that releases
// it and then fails, and reports whether it was called.
func failingRelease() (func(*dirLock) error, *bool) {
	released := new(bool)
	return func(l *dirLock) error {
		*released = true
		return errors.Join(unlockDir(l), errUnlockInjected)
	}, released
}

// closedQueueDir returns a directory holding a closed queue with one
// message.
func closedQueueDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	q, err := Open(dir, nil)
	require.NoError(t, err)
	_, err = q.Enqueue(context.Background(), []byte("kept"))
	require.NoError(t, err)
	require.NoError(t, q.Close())
	return dir
}

// TestReadLogReportsUnlockFailure: a failure to release the directory's
// lock at the end of ReadLog reaches the caller, beside fn's error when
// fn failed: a caller told the read went well would take the directory
// for writing while it may still be locked.
func TestReadLogReportsUnlockFailure(t *testing.T) {
	fnErr := errors.New("fn refused")
	for _, tc := range []struct {
		name string
		fn   error // fn's error; nil: none
	}{{"read", nil}, {"fn failed", fnErr}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := closedQueueDir(t)
			release, released := failingRelease()
			n := 0
			err := readLog(dir, 0, func(Record) error { n++; return tc.fn }, release)
			require.True(t, *released, "ReadLog released the lock through its seam")
			require.NotZero(t, n, "ReadLog read the log")
			require.ErrorIs(t, err, errUnlockInjected)
			if tc.fn != nil {
				require.ErrorIs(t, err, tc.fn, "fn's failure is kept beside the unlock's")
			}
		})
	}
}

// TestVerifyReportsUnlockFailure: a failure to release the directory's
// lock at the end of Verify reaches the caller, with the check, beside
// ErrCorrupt when the directory is damaged.
func TestVerifyReportsUnlockFailure(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, dir string) // nil: clean
		corrupt bool                           // Verify finds damage it returns ErrCorrupt for
	}{{"clean", nil, false}, {"torn", tornTail, false}, {"corrupt", corruptSnapshot, true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := closedQueueDir(t)
			if tc.damage != nil {
				tc.damage(t, dir)
			}
			release, released := failingRelease()
			c, err := verify(dir, nil, release)
			require.True(t, *released, "Verify released the lock through its seam")
			require.ErrorIs(t, err, errUnlockInjected)
			require.Equal(t, tc.corrupt, errors.Is(err, ErrCorrupt), "Verify's own verdict is kept beside the unlock's: %v", err)
			require.Equal(t, tc.damage == nil, c.Clean(), "the check is returned too")
		})
	}
}

// corruptSnapshot flips a byte in the middle of the directory's newest
// snapshot.
func corruptSnapshot(t *testing.T, dir string) {
	t.Helper()
	snaps, err := filepath.Glob(filepath.Join(dir, "snapshot-*"))
	require.NoError(t, err)
	require.NotEmpty(t, snaps)
	b, err := os.ReadFile(snaps[len(snaps)-1])
	require.NoError(t, err)
	b[len(b)/2] ^= 0xff
	require.NoError(t, os.WriteFile(snaps[len(snaps)-1], b, 0o600))
}

// errSnapshotRefused is the failure snapshotRefusingFS injects.
var errSnapshotRefused = errors.New("injected snapshot failure")

// snapshotRefusingFS is the real file system, on which no snapshot can
// be put in place.
type snapshotRefusingFS struct{ wal.OSFS }

// Rename fails for a snapshot.
func (fs snapshotRefusingFS) Rename(oldpath, newpath string) error {
	if strings.HasSuffix(newpath, ".snap") {
		return errSnapshotRefused
	}
	return fs.OSFS.Rename(oldpath, newpath)
}

// TestRepairReportsCloseFailure: when a repair's compaction fails and
// the Close after it fails too, the caller learns of both, the second
// (here a snapshot Close could not write either) kept beside the first.
func TestRepairReportsCloseFailure(t *testing.T) {
	dir := t.TempDir()
	o := &Options{FS: snapshotRefusingFS{}}
	q, err := Open(dir, o)
	require.NoError(t, err)
	_, err = q.Enqueue(context.Background(), []byte("kept"))
	require.NoError(t, err)
	require.ErrorIs(t, q.Close(), errSnapshotRefused, "the records stay after the last snapshot")
	tornTail(t, dir)
	_, err = Repair(dir, &RepairOptions{Options: o})
	require.ErrorIs(t, err, errSnapshotRefused)
	require.Equal(t, 2, strings.Count(err.Error(), errSnapshotRefused.Error()),
		"the compaction's failure and Close's: %v", err)
}

// errSegmentRemoveRefused is the failure segmentRemoveRefusingFS injects.
var errSegmentRemoveRefused = errors.New("injected segment remove failure")

// segmentRemoveRefusingFS is the real file system, on which no log
// segment can be removed: a truncation of the log's front fails, which
// poisons the log.
type segmentRemoveRefusingFS struct{ wal.OSFS }

// Remove fails for a file in the log's directory.
func (fs segmentRemoveRefusingFS) Remove(name string) error {
	if filepath.Base(filepath.Dir(name)) == logDir {
		return errSegmentRemoveRefused
	}
	return fs.OSFS.Remove(name)
}

// TestRepairReportsPoisonOnce: when a repair's compaction poisons the
// log, the Close after it returns that poison again; the caller is told
// of it once, not as two failures.
func TestRepairReportsPoisonOnce(t *testing.T) {
	dir := t.TempDir()
	// Acked messages over many segments and no snapshot to cut them:
	// the repair's compaction has segments to remove.
	o := &Options{FS: snapshotRefusingFS{}, SegmentSize: 4096}
	q, err := Open(dir, o)
	require.NoError(t, err)
	for range 200 {
		_, err = q.Enqueue(context.Background(), make([]byte, 200))
		require.NoError(t, err)
	}
	for {
		m, err := q.TryDequeue()
		if errors.Is(err, ErrEmpty) {
			break
		}
		require.NoError(t, err)
		require.NoError(t, m.Ack())
	}
	require.ErrorIs(t, q.Close(), errSnapshotRefused)
	tornTail(t, dir)
	o = &Options{FS: segmentRemoveRefusingFS{}, SegmentSize: 4096}
	_, err = Repair(dir, &RepairOptions{Options: o})
	require.ErrorIs(t, err, errSegmentRemoveRefused)
	require.Equal(t, 1, strings.Count(err.Error(), errSegmentRemoveRefused.Error()),
		"the poison once: %v", err)
}
