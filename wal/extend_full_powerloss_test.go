package wal_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/wal"
)

// fullZerosCrashFS is a crash file system on which every other write
// through a file opened write-only (the extender's zeros ahead of the
// tail) writes half its bytes and fails with ENOSPC, so that some
// extensions land and others are cut back.
type fullZerosCrashFS struct {
	*crashfs.FS
	writes atomic.Int32 // writes of zeros tried
	failed atomic.Int32 // of which refused
}

func (f *fullZerosCrashFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil || flag != os.O_WRONLY {
		return file, err
	}
	return &halfFullFile{File: file, fs: f}, nil
}

type halfFullFile struct {
	wal.File
	fs *fullZerosCrashFS
}

func (h *halfFullFile) WriteAt(p []byte, off int64) (int, error) {
	if h.fs.writes.Add(1)%2 == 0 {
		return h.File.WriteAt(p, off)
	}
	n, _ := h.File.WriteAt(p[:len(p)/2], off)
	h.fs.failed.Add(1)
	return n, &os.PathError{Op: "write", Path: "zeros", Err: syscall.ENOSPC}
}

// TestPowerLossAfterZerosCutBack: under SyncAlways, with every other
// write of zeros ahead of the tail refused half-written with ENOSPC (and
// so cut back), a power loss at each durable operation in turn leaves a
// log that opens with every record whose Wait returned nil, in order:
// the fdatasync after a cut covers the records, and the half-written
// zeros a lost cut may leave behind are taken for a clean end.
func TestPowerLossAfterZerosCutBack(t *testing.T) {
	const (
		states  = 12
		records = 30
	)
	refused, failedZeros := 0, int32(0)
	for crashAt := 1; ; crashAt++ {
		root := t.TempDir()
		cfs, err := crashfs.New(root, crashAt)
		if err != nil {
			t.Fatal(err)
		}
		fsys := &fullZerosCrashFS{FS: cfs}
		opts := &wal.Options{FS: fsys, Sync: wal.SyncAlways, SegmentSize: 16 << 10, Locked: true}
		durable := cutBackWorkload(filepath.Join(root, "log"), opts, records)
		failedZeros += fsys.failed.Load()
		if !cfs.Crashed() {
			if durable != records {
				t.Fatalf("no crash, and %d records durable of %d", durable, records)
			}
			if failedZeros == 0 {
				t.Fatal("no write of zeros was refused: the test does not reach the cut back")
			}
			t.Logf("%d durable operations, %d states, %d zero writes refused, %d refused for a hole",
				crashAt-1, (crashAt-1)*states, failedZeros, refused)
			return
		}
		if err := cfs.Image(); err != nil {
			t.Fatal(err)
		}
		for s := range states {
			if checkZeroState(t, cfs, crashAt, s, opts.SegmentSize, durable).refused {
				refused++
			}
		}
	}
}

// cutBackWorkload opens a log in dir and appends records three at a time
// before waiting for them, so that groups are written while zeros are in
// flight; it returns how many records, from the first, Wait reported
// durable.
func cutBackWorkload(dir string, opts *wal.Options, records int) int {
	l, err := wal.Open(dir, opts)
	if err != nil {
		return 0
	}
	defer l.Close()
	durable := 0
	for i := 0; i < records; i += 3 {
		var commits []*wal.Commit
		for k := i; k < min(i+3, records); k++ {
			if _, c, err := l.Append(zeroRecord(k)); err == nil {
				commits = append(commits, c)
			}
		}
		for _, c := range commits {
			if c.Wait() != nil {
				return durable
			}
			durable++
		}
		if len(commits) < min(3, records-i) {
			return durable
		}
	}
	return durable
}

// noCutFS is fullZerosFS whose write-only files also refuse Truncate, as
// a file system that fails the cut back would.
type noCutFS struct{ fullZerosFS }

func (f *noCutFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	file, err := f.fullZerosFS.OpenFile(name, flag, perm)
	if err != nil || flag != os.O_WRONLY {
		return file, err
	}
	return noCutFile{file}, nil
}

type noCutFile struct{ wal.File }

func (noCutFile) Truncate(int64) error { return syscall.EIO }

// TestZerosThatCannotBeCutBackPoison: when the cut back of zeros that
// found the disk full fails too, the commit the fsync covered fails with
// both errors, the Log is poisoned, and a reopen reads every record
// acknowledged before, taking the half-written zeros for a clean end.
func TestZerosThatCannotBeCutBackPoison(t *testing.T) {
	dir := t.TempDir()
	fs := &noCutFS{}
	l := openLog(t, dir, &wal.Options{FS: fs, Sync: wal.SyncAlways})
	acked := 0
	var err error
	for i := 0; i < 50 && err == nil; i++ {
		var c *wal.Commit
		if _, c, err = l.Append(record(i)); err == nil {
			if err = c.Wait(); err == nil {
				acked++
			}
		}
	}
	if fs.failed.Load() == 0 {
		t.Fatal("no write of zeros was tried: the test does not reach the path it guards")
	}
	if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("after %d acked: %v, want an error wrapping ENOSPC and the cut's EIO", acked, err)
	}
	if lerr := l.Err(); lerr == nil {
		t.Fatal("Err is nil after a failed cut back: the log is not poisoned")
	}
	_ = l.Close()
	l = openLog(t, dir, nil)
	defer closeLog(t, l)
	lsns, recs := readAll(t, l, 1)
	if len(lsns) < acked {
		t.Fatalf("%d records after the reopen, %d acknowledged", len(lsns), acked)
	}
	for i := range recs {
		if !bytes.Equal(recs[i], record(i)) {
			t.Fatalf("record %d after the reopen is not the one appended", i)
		}
	}
}
