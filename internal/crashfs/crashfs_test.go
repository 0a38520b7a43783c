package crashfs_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/walq/walq/internal/crashfs"
)

// TestKeepsWhatWasSynced checks the model on one history: synced data and
// names survive every state; unsynced data, names created and names
// removed since the last directory fsync survive some states and not
// others; and nothing works after the crash.
func TestKeepsWhatWasSynced(t *testing.T) {
	root := t.TempDir()
	fsys, err := crashfs.New(root, 5) // the fifth durable operation crashes
	if err != nil {
		t.Fatal(err)
	}
	a := mustCreate(t, fsys, filepath.Join(root, "a"))
	write(t, a, "hello")
	mustNil(t, a.Datasync()) // 1
	gone := mustCreate(t, fsys, filepath.Join(root, "gone"))
	mustNil(t, gone.Sync())        // 2
	mustNil(t, fsys.SyncDir(root)) // 3: a and gone are durable names
	write(t, a, " world")          // unsynced
	b := mustCreate(t, fsys, filepath.Join(root, "b"))
	write(t, b, "bee")
	mustNil(t, b.Sync())                                 // 4: b's data, not its name
	mustNil(t, fsys.Remove(filepath.Join(root, "gone"))) // not durable
	if err := fsys.SyncDir(root); !errors.Is(err, crashfs.ErrCrashed) {
		t.Fatalf("the crashing operation returned %v", err)
	}
	if _, err := a.Write([]byte("x")); !errors.Is(err, crashfs.ErrCrashed) {
		t.Fatalf("a write after the crash returned %v", err)
	}
	if n, _ := fsys.Ops(); n != 4 {
		t.Fatalf("Ops = %d, want 4", n)
	}
	seen := map[string]int{}
	for i := range 200 {
		dst := filepath.Join(t.TempDir(), "s")
		st, err := fsys.Materialize(dst, rand.New(rand.NewPCG(1, uint64(i))))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dst, "a"))
		if err != nil || !bytes.HasPrefix(got, []byte("hello")) {
			t.Fatalf("state %d (%s): a = %q, %v; want its synced bytes", i, st.Desc, got, err)
		}
		if bytes.HasPrefix(got, []byte("hello world")) {
			seen["a whole"]++
		}
		if len(got) == 5 {
			seen["a synced only"]++
		}
		if b, err := os.ReadFile(filepath.Join(dst, "b")); err == nil {
			if string(b) != "bee" {
				t.Fatalf("state %d: b = %q, want its synced bytes", i, b)
			}
			seen["b"]++
		} else {
			seen["no b"]++
		}
		if _, err := os.Stat(filepath.Join(dst, "gone")); err == nil {
			seen["gone back"]++
		} else {
			seen["gone gone"]++
		}
	}
	for _, k := range []string{"a whole", "a synced only", "b", "no b", "gone back", "gone gone"} {
		if seen[k] == 0 {
			t.Errorf("no state with %s: %v", k, seen)
		}
	}
}

// TestRenameBehindItsBack checks that a file replaced by a rename the FS
// did not see (as tidwall/wal's TruncateFront does) is a new file: its
// bytes are durable only once it is synced itself.
func TestRenameBehindItsBack(t *testing.T) {
	root := t.TempDir()
	fsys, err := crashfs.New(root, 4)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "seg")
	f := mustCreate(t, fsys, p)
	write(t, f, "old")
	mustNil(t, f.Sync())           // 1
	mustNil(t, fsys.SyncDir(root)) // 2
	if err := os.WriteFile(p+".tmp", []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		t.Fatal(err)
	}
	mustNil(t, fsys.SyncDir(root)) // 3: the name now holds the new file, never synced
	if err := fsys.Image(); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		dst := filepath.Join(t.TempDir(), "s")
		if _, err := fsys.Materialize(dst, rand.New(rand.NewPCG(2, uint64(i)))); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(filepath.Join(dst, "seg"))
		if bytes.Equal(got, []byte("old")) {
			t.Fatalf("state %d: seg holds the replaced file's bytes", i)
		}
	}
}

func mustCreate(t *testing.T, fsys *crashfs.FS, name string) interface {
	Write([]byte) (int, error)
	Sync() error
	Datasync() error
} {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func write(t *testing.T, f interface{ Write([]byte) (int, error) }, s string) {
	t.Helper()
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestRenamedDirectoryKeepsItsNames: a directory's names, once it is
// fsynced, are its own: renamed, it keeps them under either name, whether
// the rename survives (its parent fsynced after it) or not.
func TestRenamedDirectoryKeepsItsNames(t *testing.T) {
	for _, syncRoot := range []bool{false, true} {
		root := t.TempDir()
		fsys, err := crashfs.New(root, 0)
		mustNil(t, err)
		mustNil(t, os.Mkdir(filepath.Join(root, "old"), 0o700))
		f := mustCreate(t, fsys, filepath.Join(root, "old", "f"))
		write(t, f, "data")
		mustNil(t, f.Sync())
		mustNil(t, fsys.SyncDir(filepath.Join(root, "old"))) // f is a durable name in the directory
		mustNil(t, fsys.SyncDir(root))                       // old is a durable name in the root
		mustNil(t, fsys.Rename(filepath.Join(root, "old"), filepath.Join(root, "new")))
		if syncRoot {
			mustNil(t, fsys.SyncDir(root))
		}
		mustNil(t, fsys.Image())
		seen := map[string]int{}
		for i := range 50 {
			dst := filepath.Join(t.TempDir(), "s")
			st, err := fsys.Materialize(dst, rand.New(rand.NewPCG(2, uint64(i))))
			mustNil(t, err)
			for _, name := range []string{"old", "new"} {
				if _, err := os.Stat(filepath.Join(dst, name)); err != nil {
					continue
				}
				seen[name]++
				got, err := os.ReadFile(filepath.Join(dst, name, "f"))
				if err != nil || string(got) != "data" {
					t.Fatalf("state %d (%s; root fsynced after the rename: %v): %s/f = %q, %v; want its synced bytes", i, st.Desc, syncRoot, name, got, err)
				}
			}
			if syncRoot && seen["old"] > 0 {
				t.Fatalf("state %d (%s): the rename was made durable, yet the old name is back", i, st.Desc)
			}
		}
		if seen["new"] == 0 || !syncRoot && seen["old"] == 0 {
			t.Errorf("root fsynced after the rename: %v: states seen by name: %v", syncRoot, seen)
		}
	}
}

// TestLogNamesDurableOperations checks that Log gives each durable
// operation made, in order, with its kind and the name it was made on,
// and not the one that crashed: a test finds a run's segment rolls in it.
func TestLogNamesDurableOperations(t *testing.T) {
	root := t.TempDir()
	fsys, err := crashfs.New(root, 4)
	if err != nil {
		t.Fatal(err)
	}
	mustNil(t, fsys.MkdirAll(filepath.Join(root, "d"), 0o700))
	a := mustCreate(t, fsys, filepath.Join(root, "d", "a"))
	write(t, a, "x")
	mustNil(t, a.Datasync())                           // 1
	mustNil(t, fsys.SyncDir(filepath.Join(root, "d"))) // 2
	mustNil(t, a.Sync())                               // 3
	if err := fsys.SyncDir(root); !errors.Is(err, crashfs.ErrCrashed) {
		t.Fatalf("the crashing operation returned %v", err)
	}
	want := []crashfs.Op{{Kind: "fdatasync", Name: "d/a"}, {Kind: "dirsync", Name: "d"}, {Kind: "fsync", Name: "d/a"}}
	if got := fsys.Log(); !slices.Equal(got, want) {
		t.Fatalf("Log = %v, want %v", got, want)
	}
}

// TestHoldNextHoldsOneSync checks that HoldNext holds the return of the
// next durable operation on a matching name, made at its call, until
// release, and only that one: a sync of another name runs meanwhile, and
// so does the next matching one.
func TestHoldNextHoldsOneSync(t *testing.T) {
	root := t.TempDir()
	fsys, err := crashfs.New(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	a := mustCreate(t, fsys, filepath.Join(root, "a"))
	reached, release := fsys.HoldNext("a")
	synced := make(chan error)
	go func() { synced <- a.Sync() }()
	select {
	case <-reached:
	case err := <-synced:
		t.Fatalf("the sync returned %v, never held", err)
	}
	mustNil(t, fsys.SyncDir(root)) // not held
	select {
	case err := <-synced:
		t.Fatalf("the held sync returned %v before release", err)
	default:
	}
	if got := fsys.Log(); len(got) != 2 || got[0].Name != "a" || got[1].Kind != "dirsync" {
		t.Fatalf("Log while held = %v, want the held sync made, then the directory sync", got)
	}
	release()
	mustNil(t, <-synced)
	mustNil(t, a.Sync()) // the hold is spent
	if n, _ := fsys.Ops(); n != 3 {
		t.Fatalf("Ops = %d, want 3", n)
	}
}
