package wal_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/wal"
)

// errSealSync is the fsync failure sealFailFS injects.
var errSealSync = errors.New("injected fsync failure")

// sealFailFS is a crashfs.FS whose fsyncs of one file fail without
// syncing anything, as a process killed before its fsync returned leaves
// the file.
type sealFailFS struct {
	*crashfs.FS
	mu   sync.Mutex
	path string // the file whose fsyncs fail; "" for none
}

// failOn makes every fsync of path fail; "" turns the failures off.
func (s *sealFailFS) failOn(path string) {
	if path != "" {
		path = filepath.Clean(path)
	}
	s.mu.Lock()
	s.path = path
	s.mu.Unlock()
}

func (s *sealFailFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	f, err := s.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return sealFailFile{File: f, fs: s, path: filepath.Clean(name)}, nil
}

func (s *sealFailFS) Open(name string) (wal.File, error) { return s.OpenFile(name, os.O_RDONLY, 0) }

type sealFailFile struct {
	wal.File
	fs   *sealFailFS
	path string
}

func (f sealFailFile) Datasync() error {
	f.fs.mu.Lock()
	fail := f.fs.path == f.path
	f.fs.mu.Unlock()
	if fail {
		return errSealSync
	}
	return f.File.Datasync()
}

func (f sealFailFile) Sync() error { return f.Datasync() }

// TestPowerLossAfterReopenOverUnsyncedSeal: a process that dies after a
// batch rolled the log over to a new segment, and before the sealed
// segment's fsync returned, leaves that segment's last entries in the page
// cache only. The next Open counts every record it finds durable: records
// appended after it are acknowledged by fsyncs of the tail alone, and
// their entries say that everything before them was synced. Every state a
// power loss can leave after such a Flush must open and hold every record
// the Flush acknowledged and every record before them.
func TestPowerLossAfterReopenOverUnsyncedSeal(t *testing.T) {
	root := t.TempDir()
	cfs, err := crashfs.New(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	fsys := &sealFailFS{FS: cfs}
	dir := filepath.Join(root, "log")
	// Locked: the first Log is never closed, as a killed process's is not,
	// and its lock would refuse the second.
	opts := &wal.Options{FS: fsys, Sync: wal.SyncNever, SegmentSize: 4096, Locked: true}
	l1 := openLog(t, dir, opts)
	appendN(t, l1, 0, 1) // the segment is extended with zeros to its size, and they are fsynced
	fsys.failOn(filepath.Join(dir, "00000000000000000001"))
	written, rollErr := 1, error(nil)
	for ; written < 1000 && rollErr == nil; written++ { // one entry per batch, written, never synced
		_, c, err := l1.Append(record(written))
		if err == nil {
			err = c.Wait()
		}
		rollErr = err
	}
	if !errors.Is(rollErr, errSealSync) {
		t.Fatalf("appends past the first segment's end = %v, want the roll's failed fsync", rollErr)
	}
	fsys.failOn("") // the process dies here, its sealed segment unsynced

	l2 := openLog(t, dir, opts)
	_, want := readAll(t, l2, 1)
	if len(want) != written {
		t.Fatalf("reopened log holds %d records, want the %d written", len(want), written)
	}
	for i := written; i < written+20; i++ {
		want = append(want, record(i))
	}
	appendN(t, l2, written, 20)
	if err := l2.Flush(); err != nil { // acknowledged: every record up to here is durable
		t.Fatal(err)
	}
	if err := cfs.Image(); err != nil { // the power goes
		t.Fatal(err)
	}
	l2.Close()
	if err := l1.Close(); !errors.Is(err, errSealSync) {
		t.Fatalf("Close of the poisoned log = %v, want its failed fsync", err)
	}

	for i := range 300 {
		dst := filepath.Join(t.TempDir(), "s")
		st, err := cfs.Materialize(dst, rand.New(rand.NewPCG(11, uint64(i))))
		if err != nil {
			t.Fatal(err)
		}
		l, err := wal.Open(filepath.Join(dst, "log"), &wal.Options{SegmentSize: opts.SegmentSize}) // the writer's
		if err != nil {
			t.Fatalf("state %d (%s): Open: %v", i, st.Desc, err)
		}
		_, got := readAll(t, l, 1)
		l.Close()
		if len(got) != len(want) {
			t.Fatalf("state %d (%s): %d records, want the %d the Flush acknowledged", i, st.Desc, len(got), len(want))
		}
		for k := range got {
			if !bytes.Equal(got[k], want[k]) {
				t.Fatalf("state %d (%s): record %d is not what was written", i, st.Desc, k+1)
			}
		}
	}
}
