package crashfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/walq/walq/internal/crashfs"
)

// TestMaterializeSyncedKeepsOnlyWhatWasSynced: the synced state holds each
// file's bytes at its last fsync, with no write since (appended or
// overwritten), and the names of each directory's last fsync, with none
// created or removed since.
func TestMaterializeSyncedKeepsOnlyWhatWasSynced(t *testing.T) {
	root := t.TempDir()
	fsys, err := crashfs.New(root, 4) // the fourth durable operation crashes
	mustNil(t, err)
	if _, err := fsys.MaterializeSynced(filepath.Join(t.TempDir(), "s")); err == nil {
		t.Fatal("MaterializeSynced before the crash returned no error")
	}
	f, err := fsys.OpenFile(filepath.Join(root, "a"), os.O_CREATE|os.O_RDWR, 0o600)
	mustNil(t, err)
	writeAt(t, f, []byte("hello"), 0)
	mustNil(t, f.Sync()) // 1
	gone := mustCreate(t, fsys, filepath.Join(root, "gone"))
	mustNil(t, gone.Sync())        // 2
	mustNil(t, fsys.SyncDir(root)) // 3: a and gone are durable names
	writeAt(t, f, []byte("J"), 0)  // an overwrite, unsynced
	writeAt(t, f, []byte(" world"), 5)
	mustCreate(t, fsys, filepath.Join(root, "b"))
	mustNil(t, fsys.Remove(filepath.Join(root, "gone")))
	if err := fsys.SyncDir(root); !errors.Is(err, crashfs.ErrCrashed) {
		t.Fatalf("the crashing operation returned %v", err)
	}
	dst := filepath.Join(t.TempDir(), "s")
	st, err := fsys.MaterializeSynced(dst)
	mustNil(t, err)
	if got, err := os.ReadFile(filepath.Join(dst, "a")); err != nil || string(got) != "hello" {
		t.Fatalf("a = %q, %v; want %q", got, err, "hello")
	}
	if _, err := os.Stat(filepath.Join(dst, "gone")); err != nil {
		t.Fatalf("gone, a durable name removed since: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "b")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("b, created since the directory's fsync: %v", err)
	}
	if st.Holes || len(st.Kept) != 0 || len(st.Lost) != 1 || st.Lost[0] != "a" {
		t.Fatalf("state %+v: want no hole, nothing kept, a lost", st)
	}
}
