// Package faultfs is a wal.FS for fault-injection tests: the real file
// system, except that the Nth operation of the kinds it counts fails with
// ErrInjected. The kinds are the calls that change the disk or make
// something durable: open (and create), write, fsync (Sync and Datasync),
// truncate, rename, remove, mkdir, dirsync, and the writes tidwall/wal makes
// itself, which it is told of (wal.StoreWriteBatch, wal.StoreTruncateFront).
// A witness's write (wal.StoreWriteWitness) is neither counted nor failed
// unless FailNext names it: the Log writes witnesses when it stays idle, at
// times that depend on the clock, and counting them would make the
// numbering of the other operations vary from run to run.
// A failed write writes the first half of its bytes first, as a write cut
// short by a full disk does. Every operation after the Nth works again, so
// that a test sees whether its caller trusts a disk that failed once.
//
// The FS is safe for concurrent use, and works on every platform.
package faultfs

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/walq/walq/wal"
)

// ErrInjected is the failure the FS injects.
var ErrInjected = errors.New("faultfs: injected failure")

// Op is one counted operation.
type Op struct {
	Kind string // open, write, fsync, truncate, rename, remove, mkdir, dirsync, or a wal.Store… name
	Path string // the file or directory; "" for a store operation
}

// FS fails the failAt-th counted operation (from 1; 0: none) of the real
// file system.
type FS struct {
	real   wal.OSFS
	failAt int

	mu struct {
		sync.Mutex
		ops   []Op   // every counted operation, in order
		hit   bool   // the failAt-th operation happened (and failed)
		armed string // the kind whose next operation fails; "" for none
	}
}

// New returns an FS that fails its failAt-th counted operation.
func New(failAt int) *FS { return &FS{failAt: failAt} }

// Ops returns the counted operations so far, in order.
func (f *FS) Ops() []Op {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Op(nil), f.mu.ops...)
}

// FailNext makes the next counted operation of kind fail, whatever its
// number, instead of the failAt-th.
func (f *FS) FailNext(kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.armed = kind
}

// FailAfter makes the n-th counted operation from now (from 1) fail,
// instead of the failAt-th: a test that arms it once its subject is in
// place numbers the operations that follow alone, however many a setup
// made before (a setup's count can vary with the clock: a witness's write
// is not counted, but the fsync that makes it durable is).
func (f *FS) FailAfter(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failAt = len(f.mu.ops) + n
}

// Hit returns the operation that failed, if it happened.
func (f *FS) Hit() (Op, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.mu.hit {
		return Op{}, false
	}
	return f.mu.ops[f.failAt-1], true
}

// step counts an operation and returns the injected error if it is the
// failAt-th.
func (f *FS) step(kind, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if kind == wal.StoreWriteWitness && f.mu.armed != kind {
		return nil
	}
	f.mu.ops = append(f.mu.ops, Op{Kind: kind, Path: path})
	if f.mu.armed != "" && kind == f.mu.armed {
		f.mu.armed, f.failAt = "", len(f.mu.ops)
	}
	if len(f.mu.ops) != f.failAt {
		return nil
	}
	f.mu.hit = true
	return fmt.Errorf("%w: %s %s", ErrInjected, kind, path)
}

// OpenFile implements wal.FS.
func (f *FS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	if err := f.step("open", name); err != nil {
		return nil, err
	}
	file, err := f.real.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, name: name}, nil
}

// Open implements wal.FS.
func (f *FS) Open(name string) (wal.File, error) { return f.OpenFile(name, os.O_RDONLY, 0) }

// Rename implements wal.FS.
func (f *FS) Rename(oldpath, newpath string) error {
	if err := f.step("rename", oldpath); err != nil {
		return err
	}
	return f.real.Rename(oldpath, newpath)
}

// Remove implements wal.FS.
func (f *FS) Remove(name string) error {
	if err := f.step("remove", name); err != nil {
		return err
	}
	return f.real.Remove(name)
}

// ReadDir implements wal.FS; it is not counted.
func (f *FS) ReadDir(name string) ([]os.DirEntry, error) { return f.real.ReadDir(name) }

// Stat implements wal.FS; it is not counted.
func (f *FS) Stat(name string) (os.FileInfo, error) { return f.real.Stat(name) }

// MkdirAll implements wal.FS.
func (f *FS) MkdirAll(name string, perm os.FileMode) error {
	if err := f.step("mkdir", name); err != nil {
		return err
	}
	return f.real.MkdirAll(name, perm)
}

// SyncDir implements wal.FS.
func (f *FS) SyncDir(name string) error {
	if err := f.step("dirsync", name); err != nil {
		return err
	}
	return f.real.SyncDir(name)
}

// StoreOp counts a write tidwall/wal makes itself (see wal.FS).
func (f *FS) StoreOp(op string) error { return f.step(op, "") }

// faultFile is an open file of the FS.
type faultFile struct {
	wal.File
	fs   *FS
	name string
}

func (ff *faultFile) Write(p []byte) (int, error) {
	if err := ff.fs.step("write", ff.name); err != nil {
		n, _ := ff.File.Write(p[:len(p)/2])
		return n, err
	}
	return ff.File.Write(p)
}

func (ff *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := ff.fs.step("write", ff.name); err != nil {
		n, _ := ff.File.WriteAt(p[:len(p)/2], off)
		return n, err
	}
	return ff.File.WriteAt(p, off)
}

func (ff *faultFile) Sync() error {
	if err := ff.fs.step("fsync", ff.name); err != nil {
		return err
	}
	return ff.File.Sync()
}

func (ff *faultFile) Datasync() error {
	if err := ff.fs.step("fsync", ff.name); err != nil {
		return err
	}
	return ff.File.Datasync()
}

func (ff *faultFile) Truncate(size int64) error {
	if err := ff.fs.step("truncate", ff.name); err != nil {
		return err
	}
	return ff.File.Truncate(size)
}
