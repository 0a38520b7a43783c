package wal_test

import (
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/walq/walq/wal"
)

// finishingFS is the real file system, except that right after its first
// listing of a directory that holds a NAME.START file it finishes that
// truncation as a writer's Open does (removes the segments up to NAME,
// renames NAME.START to NAME): the writer beside a read-only Open.
type finishingFS struct {
	wal.OSFS
	once sync.Once
	t    *testing.T
}

func (f *finishingFS) ReadDir(name string) ([]os.DirEntry, error) {
	des, err := f.OSFS.ReadDir(name)
	for _, de := range des {
		if start := de.Name(); strings.HasSuffix(start, ".START") {
			f.once.Do(func() { f.finish(name, start, des) })
		}
	}
	return des, err
}

func (f *finishingFS) finish(dir, start string, des []os.DirEntry) {
	final := strings.TrimSuffix(start, ".START")
	for _, de := range des {
		if n := de.Name(); len(n) == len(final) && n <= final {
			if err := os.Remove(dir + "/" + n); err != nil {
				f.t.Error(err)
			}
		}
	}
	if err := os.Rename(dir+"/"+start, dir+"/"+final); err != nil {
		f.t.Error(err)
	}
}

// TestReadOnlyBesideFinishedStart: a writer's Open finishes an older
// walq's interrupted truncation (a NAME.START holding the kept segment's
// entries) while a read-only Open lists the directory. The START file it
// listed is gone when it reads it: that is a listing a writer changed, to
// be listed again, not a failure of the read-only Open.
func TestReadOnlyBesideFinishedStart(t *testing.T) {
	dir := t.TempDir()
	l, _ := manySegments(t, dir, 600)
	segs := l.Segments()
	closeLog(t, l)
	keep := segs[3]
	b, err := os.ReadFile(keep.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keep.Path+".START", b, 0o600); err != nil {
		t.Fatal(err)
	}
	ro, err := wal.Open(dir, &wal.Options{ReadOnly: true, FS: &finishingFS{t: t}})
	if err != nil {
		t.Fatalf("read-only Open while a writer finishes the truncation: %v", err)
	}
	defer closeLog(t, ro)
	if ro.FirstLSN() != keep.FirstLSN {
		t.Errorf("read-only FirstLSN %d, want %d", ro.FirstLSN(), keep.FirstLSN)
	}
	checkRecords(t, ro, keep.FirstLSN, int(keep.FirstLSN-1), 600-int(keep.FirstLSN-1))
}
