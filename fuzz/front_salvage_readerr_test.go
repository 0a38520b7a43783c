package fuzz_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// snapshotReadErrFS is the real file system, except that opening the file
// named fail fails with EIO: a disk that cannot read it.
type snapshotReadErrFS struct {
	wal.OSFS
	fail string // base name of the file that cannot be read
}

func (f snapshotReadErrFS) Open(name string) (wal.File, error) {
	if filepath.Base(name) == f.fail {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EIO}
	}
	return f.OSFS.Open(name)
}

// TestSalvageFrontOlderSnapshotUnreadable: beside a damaged newest
// snapshot and walq's marker from a later moment, a salvaging Open that
// cannot read the older snapshot it falls back to (an I/O error, not
// damage) must fail with that error and change no file. It cannot tell
// whether the marker would remove records that snapshot needs, so it must
// not finish the truncation: the segments before the marker hold intact,
// never-delivered messages.
func TestSalvageFrontOlderSnapshotUnreadable(t *testing.T) {
	img, dir, fsys := olderUnreadableImage(t)
	o := drainOptions()
	o.Salvage, o.FS = true, fsys
	for _, ro := range []bool{true, false} {
		o.ReadOnly = ro
		q, err := queue.Open(dir, &o)
		if err == nil {
			q.Close()
			t.Errorf("salvaging Open (ReadOnly %v) with the older snapshot unreadable succeeded", ro)
		} else if !errors.Is(err, syscall.EIO) {
			t.Errorf("salvaging Open (ReadOnly %v): %v; want the read error, EIO", ro, err)
		}
		after, rerr := readDir(dir)
		if rerr != nil || !sameFiles(img, after) {
			var gone []string
			for name := range img {
				if _, ok := after[name]; !ok {
					gone = append(gone, name)
				}
			}
			t.Fatalf("a failed salvaging Open (ReadOnly %v) changed the directory: %d files before, %d after, removed %v (%v)",
				ro, len(img), len(after), gone, rerr)
		}
	}
}

// TestRepairFrontOlderSnapshotUnreadable: the same directory, through
// Verify and Repair. Neither can tell whether the marker would remove
// records the older snapshot needs, so both fail with the read error, and
// Repair fails before its backup and before any change: a repair that
// backs up, then fails on the same read, leaves the operator a backup and
// an error about something else than the disk.
func TestRepairFrontOlderSnapshotUnreadable(t *testing.T) {
	img, dir, fsys := olderUnreadableImage(t)

	if _, err := queue.Verify(dir, &queue.VerifyOptions{FS: fsys}); !errors.Is(err, syscall.EIO) {
		t.Errorf("Verify with the older snapshot unreadable: %v; want the read error, EIO", err)
	}
	o := drainOptions()
	o.FS = fsys
	backedUp := false
	_, err := queue.Repair(dir, &queue.RepairOptions{Options: &o, Backup: func() error { backedUp = true; return nil }})
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("Repair with the older snapshot unreadable: %v; want the read error, EIO", err)
	}
	if backedUp {
		t.Errorf("Repair backed up before failing on a read its checks made first")
	}
	if after, rerr := readDir(dir); rerr != nil || !sameFiles(img, after) {
		t.Fatalf("a failed Repair changed the directory: %d files before, %d after (%v)", len(img), len(after), rerr)
	}
}

// olderUnreadableImage writes a directory beside a damaged newest snapshot
// and walq's marker from a later moment, and returns its image, its path
// and a file system that cannot read the older snapshot (EIO).
func olderUnreadableImage(t *testing.T) (map[string][]byte, string, snapshotReadErrFS) {
	t.Helper()
	img, _ := fallbackFrontImage(t)
	snaps := snapshotFiles(img)
	if len(snaps) != 2 {
		t.Fatalf("snapshots %v, want the older and the newer", snaps)
	}
	img = damaged(img, damageCase{file: snaps[1], damage: flipBit(int64(len(img[snaps[1]])/2), 2)})
	segs := segmentFiles(img)
	img[segs[len(segs)-2]+".FRONT"] = nil
	dir := writeImage(t, "q", img)
	return img, dir, snapshotReadErrFS{fail: filepath.Base(snaps[0])}
}

// TestOpenFrontOlderSnapshotUnreadable: the same directory, opened without
// Salvage (a writer and a read-only handle). The newest snapshot is
// damaged, which the Open's error must still say (ErrCorrupt, from which
// an application decides on a repair or a salvage), along with the read
// error that kept the marker from being compared with the older snapshot.
// Nothing changes.
func TestOpenFrontOlderSnapshotUnreadable(t *testing.T) {
	img, dir, fsys := olderUnreadableImage(t)
	o := drainOptions()
	o.FS = fsys
	for _, ro := range []bool{true, false} {
		o.ReadOnly = ro
		q, err := queue.Open(dir, &o)
		if err == nil {
			q.Close()
			t.Fatalf("Open (ReadOnly %v) beside a damaged newest snapshot succeeded", ro)
		}
		if !errors.Is(err, queue.ErrCorrupt) || !errors.Is(err, syscall.EIO) {
			t.Errorf("Open (ReadOnly %v): %v; want the damaged snapshot (ErrCorrupt) and the read error (EIO)", ro, err)
		}
		if after, rerr := readDir(dir); rerr != nil || !sameFiles(img, after) {
			t.Fatalf("a failed Open (ReadOnly %v) changed the directory: %d files before, %d after (%v)", ro, len(img), len(after), rerr)
		}
	}
}
