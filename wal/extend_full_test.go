package wal_test

import (
	"os"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/walq/walq/wal"
)

// fullZerosFS is the real file system, except that every write through a
// file opened write-only (the extender's, which writes the zeros ahead of
// the tail) writes the first half of its bytes and fails with ENOSPC, as
// on a disk with room for records but not for a run of zeros. tidwall/wal
// writes the records around FS.
type fullZerosFS struct {
	wal.OSFS
	failed atomic.Int32 // writes of zeros refused so far
}

func (f *fullZerosFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil || flag != os.O_WRONLY {
		return file, err
	}
	return &fullZerosFile{File: file, fs: f}, nil
}

type fullZerosFile struct {
	wal.File
	fs *fullZerosFS
}

func (z *fullZerosFile) WriteAt(p []byte, off int64) (int, error) {
	n, _ := z.File.WriteAt(p[:len(p)/2], off)
	z.fs.failed.Add(1)
	return n, &os.PathError{Op: "write", Path: "zeros", Err: syscall.ENOSPC}
}

// TestZerosThatDoNotFitAreTakenBack: under SyncAlways, zeros ahead of the
// tail that find the disk full are cut back and the records are fsynced
// without them: every commit succeeds, the log is not poisoned, the tail
// file ends at its last entry while the log is open (the half the write
// made is taken back, freeing its space for the records), and a reopen
// reads every record.
func TestZerosThatDoNotFitAreTakenBack(t *testing.T) {
	dir := t.TempDir()
	fs := &fullZerosFS{}
	l := openLog(t, dir, &wal.Options{FS: fs, Sync: wal.SyncAlways})
	appendN(t, l, 0, 300)
	if fs.failed.Load() == 0 {
		t.Fatal("no write of zeros was tried: the test does not reach the path it guards")
	}
	if err := l.Err(); err != nil {
		t.Fatalf("Err after zeros that did not fit: %v", err)
	}
	tail := segmentFiles(t, dir)[0]
	if end, b := writtenEnd(t, dir, tail); int64(len(b)) != end {
		t.Fatalf("the tail holds %d bytes, its entries end at %d: the zeros' half was not taken back", len(b), end)
	}
	closeLog(t, l)
	l = openLog(t, dir, nil)
	defer closeLog(t, l)
	checkRecords(t, l, 1, 0, 300)
}

// TestZerosInFlightThatDoNotFit: when the zeros an fsync job holds find
// the disk full, the commit it covers, a group that waited for the zeros
// and a commit waiting for the next fsync all succeed, and the log reads
// back every record.
func TestZerosInFlightThatDoNotFit(t *testing.T) {
	dir := t.TempDir()
	fs := &heldZerosFS{entered: make(chan struct{}), release: make(chan struct{}), fail: &os.PathError{Op: "write", Path: "zeros", Err: syscall.ENOSPC}}
	l := openLog(t, dir, &wal.Options{FS: fs, Sync: wal.SyncAlways})
	first := holdZeros(t, l, fs)
	written, durable := make(chan error, 1), make(chan error, 1)
	for i, ch := range []chan error{written, durable} {
		go func() {
			_, c, err := l.Append(record(1 + i))
			if err == nil && ch == written {
				err = c.WaitWritten()
			} else if err == nil {
				err = c.Wait()
			}
			ch <- err
		}()
	}
	close(fs.release)
	for name, ch := range map[string]<-chan error{"the held job's Wait": first, "WaitWritten": written, "Wait": durable} {
		if err := <-ch; err != nil {
			t.Errorf("%s: %v, want nil", name, err)
		}
	}
	if err := l.Err(); err != nil {
		t.Errorf("Err: %v", err)
	}
	closeLog(t, l)
	l = openLog(t, dir, nil)
	defer closeLog(t, l)
	lsns, recs := readAll(t, l, 1)
	if len(lsns) != 3 {
		t.Fatalf("%d records after the reopen, want 3", len(lsns))
	}
	seen := map[string]bool{}
	for _, r := range recs {
		seen[string(r)] = true
	}
	for i := 0; i < 3; i++ {
		if !seen[string(record(i))] {
			t.Errorf("record %d missing after the reopen", i)
		}
	}
}
