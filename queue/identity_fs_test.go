package queue_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// openLogFS is the real file system, and it records the files opened in
// dir and in its log directory.
type openLogFS struct {
	wal.OSFS
	dir    string
	mu     sync.Mutex
	opened []string // paths relative to dir, guarded by mu
}

func (f *openLogFS) Open(name string) (wal.File, error) {
	return f.OpenFile(name, os.O_RDONLY, 0)
}

func (f *openLogFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	if rel, err := filepath.Rel(f.dir, name); err == nil && !strings.HasPrefix(rel, "..") {
		f.mu.Lock()
		f.opened = append(f.opened, rel)
		f.mu.Unlock()
	}
	return f.OSFS.OpenFile(name, flag, perm)
}

// segmentsOpened returns the log segment files opened so far.
func (f *openLogFS) segmentsOpened() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var segs []string
	for _, rel := range f.opened {
		dir, name := filepath.Split(rel)
		if dir == "log/" && name != "LOCK" && !strings.HasPrefix(name, ".") {
			segs = append(segs, rel)
		}
	}
	return segs
}

// wasOpened reports whether the file rel (relative to dir) was opened.
func (f *openLogFS) wasOpened(rel string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.opened, rel)
}

// TestAdoptProbeThroughFS: the log of a directory written before identity
// files is read through Options.FS when Open infers its kind, as every
// other read of the queue's files is; a file system that stands in for
// the disk (a fault or crash test, an encrypting or remote one) is not
// bypassed.
func TestAdoptProbeThroughFS(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, nil)
	enqueue(t, q, "x")
	require.NoError(t, q.Close())
	require.NoError(t, os.Remove(filepath.Join(dir, "IDENTITY")))

	fsys := &openLogFS{dir: dir}
	_, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: queue.Options{FS: fsys}})
	require.ErrorIs(t, err, queue.ErrWrongKind)
	require.ErrorContains(t, err, "inferred from its log")
	require.NotEmpty(t, fsys.segmentsOpened(), "the log the kind was inferred from was read around Options.FS")
}

// TestReadOnlyThroughFS: a read-only open reads the identity file and the
// log through Options.FS.
func TestReadOnlyThroughFS(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, nil)
	enqueue(t, q, "x")
	require.NoError(t, q.Close())

	fsys := &openLogFS{dir: dir}
	r, err := queue.Open(dir, &queue.Options{ReadOnly: true, FS: fsys})
	require.NoError(t, err)
	require.EqualValues(t, 1, r.Stats().Ready)
	require.NoError(t, r.Close())
	require.True(t, fsys.wasOpened("IDENTITY"), "the identity file was read around Options.FS")
	require.NotEmpty(t, fsys.segmentsOpened(), "the log was read around Options.FS")
}

// movedFS is the real file system with the directory from moved to to:
// a name under from is the same name under to. It stands in for a disk
// that package os does not see, so that a read around it finds nothing.
type movedFS struct {
	wal.OSFS
	from, to string
}

func (f movedFS) path(name string) string {
	if rel, err := filepath.Rel(f.from, name); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.Join(f.to, rel)
	}
	return name
}

func (f movedFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	return f.OSFS.OpenFile(f.path(name), flag, perm)
}
func (f movedFS) Open(name string) (wal.File, error)         { return f.OSFS.Open(f.path(name)) }
func (f movedFS) Rename(from, to string) error               { return f.OSFS.Rename(f.path(from), f.path(to)) }
func (f movedFS) Remove(name string) error                   { return f.OSFS.Remove(f.path(name)) }
func (f movedFS) ReadDir(name string) ([]os.DirEntry, error) { return f.OSFS.ReadDir(f.path(name)) }
func (f movedFS) MkdirAll(name string, perm os.FileMode) error {
	return f.OSFS.MkdirAll(f.path(name), perm)
}
func (f movedFS) Stat(name string) (os.FileInfo, error) { return f.OSFS.Stat(f.path(name)) }
func (f movedFS) SyncDir(name string) error             { return f.OSFS.SyncDir(f.path(name)) }

// TestThroughFSOnly: a queue whose files only Options.FS shows (the
// directory named is empty on the disk) is opened read-only, and its kind
// inferred, from what Options.FS shows: no check of the directory, listing
// or read goes around it.
func TestThroughFSOnly(t *testing.T) {
	real, named := t.TempDir(), t.TempDir()
	q := open(t, real, nil)
	enqueue(t, q, "x")
	require.NoError(t, q.Close())
	fsys := movedFS{from: named, to: real}

	r, err := queue.Open(named, &queue.Options{ReadOnly: true, FS: fsys})
	require.NoError(t, err)
	require.EqualValues(t, 1, r.Stats().Ready)
	require.Equal(t, queue.KindAck, r.Identity().Kind)
	require.NoError(t, r.Close())

	require.NoError(t, os.Remove(filepath.Join(real, "IDENTITY")))
	_, err = queue.OpenSorted[int64](named, &queue.SortedOptions{Options: queue.Options{FS: fsys}})
	require.ErrorIs(t, err, queue.ErrWrongKind)
	require.ErrorContains(t, err, "inferred from its log")
	_, err = queue.ReadIdentity(real)
	require.ErrorIs(t, err, fs.ErrNotExist, "the directory was adopted as another kind")
}
