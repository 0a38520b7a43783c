// Package crashfs is a wal.FS for crash tests that keeps exactly what was
// made durable, as a power loss would: a file's data by an fsync or
// fdatasync of that file (its content is read, from the real directory, at
// the moment the sync is called), a name by an fsync of its directory. The
// names a directory's fsync made durable are the directory's own: renamed,
// it keeps them under its new name, and under its old one in a state that
// loses the rename.
// Everything else (writes not synced since, names created, renamed or
// removed since the directory's last fsync) may be lost, kept, torn at any
// byte (appends) or sector (overwrites) or zeroed, as the test's seeded
// generator chooses when it builds a crash state.
//
// The FS works on a real directory tree under its root: reads and writes
// go to the real files (tidwall/wal writes its segments there with package
// os, out of the FS's sight), and the FS records, at each sync, what that
// sync made durable. Files are told apart by identity (os.SameFile), so
// that a rename behind the FS's back (tidwall/wal's TruncateFront, or its
// Open finishing one; walq calls the first never and finishes the second
// itself, through the FS) is seen for what it is: a new file under an old
// name. A rename through the FS never meets a walk of the tree (at a
// directory fsync or the crash); one behind its back may land between the
// walk's listing of the directory and its look at the name, and then the
// file is forgotten: its synced bytes are taken for never synced. Such a
// state holds less than the disk would, never more: a test may fail
// wrongly on it, or spend a state on one no disk leaves.
//
// It crashes at the Nth durable operation (file sync or directory sync,
// counted from 1): that operation and every later call of the FS, the
// StoreOp notices included, fail with ErrCrashed, so nothing more becomes
// durable; at that moment the FS takes an image of the real tree (every
// name and every byte written). Materialize then builds, in a fresh
// directory, one state a power loss at that moment can leave;
// MaterializeSynced the one that keeps only what was made durable.
//
// The FS is safe for concurrent use. It is test code: it holds every
// synced version of every file in memory.
//
// # Writes over synced bytes
//
// A write at an offset inside the file's synced size replaces bytes there.
// The FS does not see the writes themselves (tidwall/wal makes them with
// package os): it compares, at the crash, each file with its content at
// its last sync. Bytes appended past the synced size are kept, torn or
// followed by debris as described at Materialize, exactly as when only
// appends were modelled. Bytes that differ inside the synced size were
// overwritten: a state cuts the synced size into 512-byte sectors or 4 KiB
// pages (its choice) and gives each changed one either its synced bytes
// or its bytes at the crash, all the old, all the new, or each at random,
// so that any subset of the overwrites survives, in any order, a later
// write without an earlier one included. What a sync made durable stays.
// A file cut shorter than its synced size since keeps its synced size: the
// cut is lost, but the bytes overwritten before it, up to the cut, may
// have reached the disk as above.
//
// The states are sampled, not enumerated: each Materialize call draws one
// from its generator, so a suite makes as many as it asks for, whatever
// the size of the overwrites.
//
// Limits: a sector written twice since the last sync survives with its
// synced bytes or its last ones, never the ones written between; a write
// is never torn inside a sector (disks write 512 bytes whole); a file cut
// shorter and written again past its old size is taken for an overwrite.
// Only the content at the crash is seen, so bytes written and then cut
// away, or written twice, never appear, though a disk may have kept them;
// a write of the bytes already there is not seen, which changes nothing.
// The sector that holds the synced end is judged in two parts, the bytes
// overwritten and the bytes appended, so a state may keep one without the
// other (a hole is reported when the new bytes follow lost ones).
// A file is known by its device and inode numbers, so an inode
// freed and reused between two looks at the tree would be taken for the
// old file (walq holds its segment files open until no reader needs them,
// which makes that rare); and directory entries are judged one name at a
// time, so a state may keep one half of a rename and not the other, which
// a journaling file system would not do.
package crashfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/walq/walq/wal"
)

// ErrCrashed is returned by every call after the crash.
var ErrCrashed = errors.New("crashfs: crashed")

// FS is a crashing file system over the tree under a root directory.
type FS struct {
	root    string // the real directory the FS works in; itself always exists
	crashAt int    // the durable operation that crashes, from 1; 0: never
	// Set by tests only (export_test.go), to hold a rename and a walk of
	// the tree in their worst gaps: listed is called by look, with mu
	// held, between the listing of directory rel and the Lstat of its
	// names; renaming by Rename just before the real rename.
	listed   func(rel string)
	renaming func()

	mu struct {
		sync.Mutex
		ops     int                          // durable operations made (not counting the crash)
		crashed bool                         // the crash happened
		known   []*inode                     // files seen in the last look at the tree, or opened since
		durable map[string]map[string]*inode // directory (relative) -> name -> file, as its last fsync left it
		// dirNames is durable by directory: its names as its last fsync
		// left them, wherever it is now. A renamed directory keeps them
		// (they are its content, not its parent's), under either name.
		dirNames map[*inode]map[string]*inode
		image    map[string]map[string]*inode // at the crash (or at Image): directory -> name -> file
		imageDir map[string]*inode            // at the crash: directory (relative) -> the directory
		content  map[*inode][]byte            // at the crash: every file's bytes
		kinds    map[string]int               // durable operations made, by kind, for coverage
		log      []Op                         // durable operations made, in order (not counting the crash)
		hold     *hold                        // the next durable operation it matches waits; nil: none
	}
}

// hold is a durable operation held back (HoldNext).
type hold struct {
	prefix  string        // names it matches, relative to the root
	reached chan struct{} // closed when the held operation arrives
	release chan struct{} // closed to let it run
}

// Op is one durable operation the FS made: its kind ("fsync",
// "fdatasync", "dirsync") and the name it was made on, relative to the
// root, as it was called (a file renamed since keeps its old name here).
type Op struct {
	Kind string
	Name string
}

// inode is one file (or directory) the FS knows.
type inode struct {
	fi     os.FileInfo // identity, for os.SameFile
	dir    bool
	synced []byte // the content at its last fsync; nil: never synced
}

// New returns an FS over root, which must exist and is taken as durable
// as it is now (a fresh directory: empty). It crashes at the crashAt-th
// durable operation; 0 means never.
func New(root string, crashAt int) (*FS, error) {
	fsys := &FS{root: filepath.Clean(root), crashAt: crashAt}
	fsys.mu.durable = make(map[string]map[string]*inode)
	fsys.mu.dirNames = make(map[*inode]map[string]*inode)
	fsys.mu.kinds = make(map[string]int)
	tree, dirs, err := fsys.look()
	if err != nil {
		return nil, err
	}
	for dir, names := range tree {
		fsys.mu.durable[dir] = names
		fsys.mu.dirNames[dirs[dir]] = names
		for name, ino := range names {
			if ino.dir {
				continue
			}
			if ino.synced, err = os.ReadFile(fsys.abs(filepath.Join(dir, name))); err != nil {
				return nil, err
			}
		}
	}
	return fsys, nil
}

// Crashed reports whether the crash happened.
func (fsys *FS) Crashed() bool {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	return fsys.mu.crashed
}

// Ops returns the durable operations made so far, in all and by kind
// ("fsync", "fdatasync", "dirsync").
func (fsys *FS) Ops() (int, map[string]int) {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	kinds := make(map[string]int, len(fsys.mu.kinds))
	for k, n := range fsys.mu.kinds {
		kinds[k] = n
	}
	return fsys.mu.ops, kinds
}

// rel returns name relative to the root, or an error outside it.
func (fsys *FS) rel(name string) (string, error) {
	r, err := filepath.Rel(fsys.root, filepath.Clean(name))
	if err != nil || r == ".." || len(r) > 2 && r[:3] == ".."+string(filepath.Separator) {
		return "", fmt.Errorf("crashfs: %s is outside %s", name, fsys.root)
	}
	return r, nil
}

func (fsys *FS) abs(rel string) string { return filepath.Join(fsys.root, rel) }

// check fails every call after the crash; the caller holds mu.
func (fsys *FS) checkLocked() error {
	if fsys.mu.crashed {
		return ErrCrashed
	}
	return nil
}

func (fsys *FS) check() error {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	return fsys.checkLocked()
}

// Log returns the durable operations made so far, in order: Log()[i] is
// durable operation i+1, the one a crashAt of i+1 crashes. A test reads
// where a run's segment rolls fell from it, to choose crash points.
func (fsys *FS) Log() []Op {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	return append([]Op(nil), fsys.mu.log...)
}

// HoldNext holds the return of the next durable operation on a name
// (relative to the root) that begins with prefix until release is called:
// the operation itself is made when it is called (a sync makes durable
// what the file holds then), and reached is closed once it is. A test uses
// it to place other calls' writes between two syncs deterministically
// (several callers' records written while one fsync is in flight, so that
// the next one takes them all). Other calls run meanwhile as usual. An
// operation that crashes is not held. release may be called more than
// once, and before the operation arrives (it then does not wait). The
// hold is taken by the first matching operation to return after the
// call, so a test calls it while none is in flight: one made before the
// call and not yet returned would take it.
func (fsys *FS) HoldNext(prefix string) (reached <-chan struct{}, release func()) {
	h := &hold{prefix: prefix, reached: make(chan struct{}), release: make(chan struct{})}
	fsys.mu.Lock()
	fsys.mu.hold = h
	fsys.mu.Unlock()
	var once sync.Once
	return h.reached, func() {
		once.Do(func() {
			fsys.mu.Lock()
			if fsys.mu.hold == h {
				fsys.mu.hold = nil
			}
			fsys.mu.Unlock()
			close(h.release)
		})
	}
}

// waitHold waits, if a hold matches name, until it is released.
func (fsys *FS) waitHold(name string) {
	fsys.mu.Lock()
	h := fsys.mu.hold
	if h == nil || !strings.HasPrefix(name, h.prefix) {
		fsys.mu.Unlock()
		return
	}
	fsys.mu.hold = nil
	fsys.mu.Unlock()
	close(h.reached)
	<-h.release
}

// durableOp runs one durable operation on name (relative to the root):
// the crash if it is the crashAt-th, else record (under mu). kind is
// counted for coverage.
func (fsys *FS) durableOp(kind, name string, record func() error) error {
	if err := fsys.runDurableOp(kind, name, record); err != nil {
		return err
	}
	fsys.waitHold(name)
	return nil
}

func (fsys *FS) runDurableOp(kind, name string, record func() error) error {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if err := fsys.checkLocked(); err != nil {
		return err
	}
	if fsys.crashAt > 0 && fsys.mu.ops+1 == fsys.crashAt {
		fsys.mu.crashed = true
		if err := fsys.takeImageLocked(); err != nil {
			return fmt.Errorf("%w (and the image failed: %v)", ErrCrashed, err)
		}
		return ErrCrashed
	}
	if err := record(); err != nil {
		return err
	}
	fsys.mu.ops++
	fsys.mu.kinds[kind]++
	fsys.mu.log = append(fsys.mu.log, Op{Kind: kind, Name: name})
	return nil
}

// look walks the real tree and returns, per directory, each name's file,
// matched to the files the FS knows by identity (new ones are added), and
// each directory's own file (the root's under "."); the files not found
// are forgotten (they have no name left, so they cannot be seen again, and
// their inode may be reused). The caller holds mu, or owns the FS.
func (fsys *FS) look() (map[string]map[string]*inode, map[string]*inode, error) {
	tree := make(map[string]map[string]*inode)
	rootInfo, err := os.Lstat(fsys.root)
	if err != nil {
		return nil, nil, fmt.Errorf("crashfs: look at %s: %w", fsys.root, err)
	}
	root := fsys.identify(rootInfo)
	dirs := map[string]*inode{".": root}
	found := []*inode{root}
	var walk func(rel string) error
	walk = func(rel string) error {
		des, err := os.ReadDir(fsys.abs(rel))
		if err != nil {
			return err
		}
		if fsys.listed != nil {
			fsys.listed(rel)
		}
		names := make(map[string]*inode, len(des))
		tree[rel] = names
		for _, de := range des {
			p := filepath.Join(rel, de.Name())
			fi, err := os.Lstat(fsys.abs(p))
			if errors.Is(err, os.ErrNotExist) {
				continue // removed meanwhile (tidwall/wal works concurrently)
			}
			if err != nil {
				return err
			}
			ino := fsys.identify(fi)
			names[de.Name()], found = ino, append(found, ino)
			if ino.dir {
				dirs[p] = ino
				if err := walk(p); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk("."); err != nil {
		return nil, nil, fmt.Errorf("crashfs: look at %s: %w", fsys.root, err)
	}
	fsys.mu.known = found
	return tree, dirs, nil
}

// identify returns the known file fi is, or a new one; the caller holds mu.
func (fsys *FS) identify(fi os.FileInfo) *inode {
	for _, ino := range fsys.mu.known {
		if os.SameFile(ino.fi, fi) && ino.dir == fi.IsDir() {
			return ino
		}
	}
	ino := &inode{fi: fi, dir: fi.IsDir()}
	fsys.mu.known = append(fsys.mu.known, ino)
	return ino
}

// takeImageLocked records every name and every byte of the real tree: what
// the disk's cache held when the power went.
func (fsys *FS) takeImageLocked() error {
	tree, dirs, err := fsys.look()
	if err != nil {
		return err
	}
	fsys.mu.image, fsys.mu.imageDir = tree, dirs
	fsys.mu.content = make(map[*inode][]byte)
	for dir, names := range tree {
		for name, ino := range names {
			if ino.dir {
				continue
			}
			b, err := os.ReadFile(fsys.abs(filepath.Join(dir, name)))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			fsys.mu.content[ino] = b
		}
	}
	return nil
}

// Image takes the image of the tree now, as if the power went now, if the
// crash did not happen: a workload that ended before the crashAt-th
// operation is then materialized as a power loss at its end. After the
// crash it does nothing.
func (fsys *FS) Image() error {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if fsys.mu.crashed {
		return nil
	}
	fsys.mu.crashed = true
	return fsys.takeImageLocked()
}

// OpenFile implements wal.FS. A write-only open is made read-write on the
// real file, so that a sync can read what it makes durable.
func (fsys *FS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	if _, err := fsys.rel(name); err != nil {
		return nil, err
	}
	if err := fsys.check(); err != nil {
		return nil, err
	}
	if flag&(os.O_WRONLY|os.O_RDWR) == os.O_WRONLY {
		flag = flag&^os.O_WRONLY | os.O_RDWR
	}
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return fsys.wrap(f)
}

// Open implements wal.FS.
func (fsys *FS) Open(name string) (wal.File, error) { return fsys.OpenFile(name, os.O_RDONLY, 0) }

func (fsys *FS) wrap(f *os.File) (wal.File, error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	fsys.mu.Lock()
	ino := fsys.identify(fi)
	fsys.mu.Unlock()
	return &file{File: f, fsys: fsys, ino: ino}, nil
}

// Rename implements wal.FS. It renames under mu, so that no walk of the
// tree (look, at a directory sync or the crash) runs meanwhile: a walk
// that listed the old name, then found it gone, and never listed the new
// one would forget the file, and with it what its syncs made durable.
func (fsys *FS) Rename(oldpath, newpath string) error {
	if err := fsys.bothInside(oldpath, newpath); err != nil {
		return err
	}
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if err := fsys.checkLocked(); err != nil {
		return err
	}
	if fsys.renaming != nil {
		fsys.renaming()
	}
	return os.Rename(oldpath, newpath)
}

func (fsys *FS) bothInside(a, b string) error {
	if _, err := fsys.rel(a); err != nil {
		return err
	}
	if _, err := fsys.rel(b); err != nil {
		return err
	}
	return fsys.check()
}

// Remove implements wal.FS.
func (fsys *FS) Remove(name string) error {
	if err := fsys.bothInside(name, name); err != nil {
		return err
	}
	return os.Remove(name)
}

// ReadDir implements wal.FS.
func (fsys *FS) ReadDir(name string) ([]os.DirEntry, error) {
	if err := fsys.bothInside(name, name); err != nil {
		return nil, err
	}
	return os.ReadDir(name)
}

// MkdirAll implements wal.FS. A directory made is durable only once its
// parent is fsynced.
func (fsys *FS) MkdirAll(name string, perm os.FileMode) error {
	if err := fsys.bothInside(name, name); err != nil {
		return err
	}
	return os.MkdirAll(name, perm)
}

// Stat implements wal.FS.
func (fsys *FS) Stat(name string) (os.FileInfo, error) {
	if err := fsys.bothInside(name, name); err != nil {
		return nil, err
	}
	return os.Stat(name)
}

// SyncDir implements wal.FS: the directory's names, as they are now, are
// durable.
func (fsys *FS) SyncDir(name string) error {
	rel, err := fsys.rel(name)
	if err != nil {
		return err
	}
	return fsys.durableOp("dirsync", rel, func() error {
		tree, dirs, err := fsys.look()
		if err != nil {
			return err
		}
		names, ok := tree[rel]
		if !ok {
			return fmt.Errorf("crashfs: fsync directory %s: %w", name, os.ErrNotExist)
		}
		fsys.mu.durable[rel] = names
		fsys.mu.dirNames[dirs[rel]] = names
		return nil
	})
}

// StoreOp implements the notice of a write tidwall/wal makes itself (see
// wal.FS): it fails after the crash, so nothing is written then.
func (fsys *FS) StoreOp(op string) error { return fsys.check() }

// file is an open file of the FS.
type file struct {
	*os.File
	fsys *FS
	ino  *inode
}

func (f *file) Read(p []byte) (int, error) {
	if err := f.fsys.check(); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fsys.check(); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *file) Write(p []byte) (int, error) {
	if err := f.fsys.check(); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fsys.check(); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *file) Truncate(size int64) error {
	if err := f.fsys.check(); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

// Close closes the real file; after the crash it says so.
func (f *file) Close() error {
	err := f.File.Close()
	if cerr := f.fsys.check(); cerr != nil {
		return cerr
	}
	return err
}

// Sync makes the file's content, as it is now, durable.
func (f *file) Sync() error { return f.sync("fsync") }

// Datasync is Sync: the content and the size are what a crash test needs.
func (f *file) Datasync() error { return f.sync("fdatasync") }

func (f *file) sync(kind string) error {
	name, err := f.fsys.rel(f.Name())
	if err != nil {
		return err
	}
	return f.fsys.durableOp(kind, name, func() error {
		fi, err := f.File.Stat()
		if err != nil {
			return err
		}
		b := make([]byte, fi.Size())
		if n, err := f.File.ReadAt(b, 0); n < len(b) {
			return fmt.Errorf("crashfs: read %s to sync it: %w", f.Name(), err)
		}
		f.ino.synced = b
		return nil
	})
}

// sortedNames returns a map's names in order, so that a seeded choice is
// the same on every run.
func sortedNames(m map[string]*inode) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
