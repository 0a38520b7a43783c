package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// FS is the file system a Log (and a snapshot writer, package recovery)
// works through: every open, read, write, fsync, rename, remove, listing
// and directory fsync walq makes goes through it, so that a test can stand
// in for the disk: keep only what was fsynced, or fail any one call. Nil in
// Options means the real file system (OSFS).
//
// tidwall/wal writes and renames the segment files with package os itself;
// an FS never sees those writes. walq therefore fsyncs, through the FS, every
// segment file it counts durable, and the directory after every create,
// rename and remove, and it tells an FS that has the method
//
//	StoreOp(op string) error
//
// before each write tidwall/wal makes on its own: op is "write-batch" (an
// append of one batch, which may roll to a new segment), "write-witness"
// (an append of one witness, an entry of no record that the Log writes on
// its own when it stays idle after an fsync, so at times that depend on
// the clock: witness.go) or "truncate-front" (the rewrite and removals of
// TruncateFront). A non-nil error fails that
// write as if tidwall/wal had failed it, which poisons the Log.
//
// An FS must be safe for concurrent use; a File is used by one goroutine at
// a time, except ReadAt and Datasync, which may run concurrently with each
// other.
type FS interface {
	// OpenFile is os.OpenFile.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Open opens name read-only.
	Open(name string) (File, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	ReadDir(name string) ([]os.DirEntry, error)
	MkdirAll(name string, perm os.FileMode) error
	Stat(name string) (os.FileInfo, error)
	// SyncDir fsyncs the directory name, so that the creates, renames and
	// removes made in it survive a power loss.
	SyncDir(name string) error
}

// File is an open file of an FS.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Seeker
	io.Closer
	// Sync is fsync: the file's data and metadata reach the disk.
	Sync() error
	// Datasync is fdatasync where the platform has it (the data and the
	// metadata needed to read it back), Sync elsewhere.
	Datasync() error
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
}

// storeObserver is an FS told of the writes tidwall/wal makes itself.
type storeObserver interface {
	StoreOp(op string) error
}

// The store operations an FS with a StoreOp method is told of.
const (
	StoreWriteBatch    = "write-batch"
	StoreWriteWitness  = "write-witness"
	StoreTruncateFront = "truncate-front"
)

// OSFS is the real file system, through package os.
type OSFS struct{}

// osFile is an *os.File with Datasync.
type osFile struct{ *os.File }

func (f osFile) Datasync() error { return datasync(f.File) }

// OpenFile implements FS.
func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Open implements FS.
func (OSFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Rename implements FS.
func (OSFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// Remove implements FS.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// ReadDir implements FS.
func (OSFS) ReadDir(name string) ([]os.DirEntry, error) { return os.ReadDir(name) }

// MkdirAll implements FS.
func (OSFS) MkdirAll(name string, perm os.FileMode) error { return os.MkdirAll(name, perm) }

// Stat implements FS.
func (OSFS) Stat(name string) (os.FileInfo, error) { return os.Stat(name) }

// SyncDir implements FS.
func (OSFS) SyncDir(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// orOS returns fsys, or OSFS when it is nil.
func orOS(fsys FS) FS {
	if fsys == nil {
		return OSFS{}
	}
	return fsys
}

// ReadFile reads the whole file name through fsys (nil: OSFS).
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := orOS(fsys).Open(name)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return b, err
}

// SyncDirFS fsyncs the directory dir through fsys (nil: OSFS), wrapping a
// failure with the directory's name.
func SyncDirFS(fsys FS, dir string) error {
	if err := orOS(fsys).SyncDir(dir); err != nil {
		return fmt.Errorf("wal: fsync directory %s: %w", dir, err)
	}
	return nil
}

// MkdirAll creates dir and its missing parents through fsys (nil: OSFS)
// and fsyncs the parent of each directory it creates: a new directory's
// name is durable only once its parent is fsynced, and without it a power
// loss can take the directory and every file fsynced in it.
func MkdirAll(fsys FS, dir string, perm os.FileMode) error {
	fsys = orOS(fsys)
	fi, err := fsys.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAll(fsys, parent, perm); err != nil {
			return err
		}
	}
	if err := fsys.MkdirAll(dir, perm); err != nil {
		return err
	}
	return SyncDirFS(fsys, parent)
}
