package crashfs_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/walq/walq/internal/crashfs"
)

// TestRenameBesideDirectorySync: a file fsynced, then renamed while a
// directory fsync walks the tree (walq's snapshot rename beside a log
// roll's directory sync), keeps its synced bytes. The rename, past its
// checks, waits (a second at most) for the walk to list the directory,
// and the walk, before it looks at each name, waits (a second at most)
// for the rename to finish: the FS must keep the two apart, and every
// state a power loss then leaves holds the file's synced bytes.
func TestRenameBesideDirectorySync(t *testing.T) {
	want := bytes.Repeat([]byte("s"), 271)
	root := t.TempDir()
	fsys, err := crashfs.New(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	tmp, final := filepath.Join(root, "snap.tmp"), filepath.Join(root, "snap")
	writeSynced(t, fsys, tmp, want)
	starting, listed, moved := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once sync.Once
	crashfs.SetHooks(fsys, func(string) {
		once.Do(func() { close(listed); waitAtMost(moved) })
	}, func() { close(starting); waitAtMost(listed) })
	renamed := make(chan error, 1)
	go func() { renamed <- fsys.Rename(tmp, final); close(moved) }()
	<-starting
	if err := fsys.SyncDir(root); err != nil {
		t.Fatal(err)
	}
	if err := <-renamed; err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(root); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Image(); err != nil {
		t.Fatal(err)
	}
	for s := range 16 {
		dst := filepath.Join(t.TempDir(), "s")
		st, err := fsys.Materialize(dst, rand.New(rand.NewPCG(1, uint64(s))))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dst, "snap"))
		if err != nil {
			t.Fatalf("state %d (%s): %v", s, st.Desc, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("state %d (%s): the renamed file holds %d bytes %.20q, want its %d synced bytes", s, st.Desc, len(got), got, len(want))
		}
	}
}

// writeSynced creates the file name on fsys with content b, fsyncs and
// closes it.
func writeSynced(t *testing.T, fsys *crashfs.FS, name string, b []byte) {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// waitAtMost waits for c to be closed, or a second.
func waitAtMost(c <-chan struct{}) {
	select {
	case <-c:
	case <-time.After(time.Second):
	}
}
