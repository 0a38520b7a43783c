package crashfs_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/walq/walq/internal/crashfs"
)

// TestRenameBesideDirectorySync: a file fsynced, then renamed while
// another goroutine fsyncs a directory (walq's snapshot rename beside a
// log roll's directory sync) keeps its synced bytes: every state a power
// loss leaves holds them under one of its names.
func TestRenameBesideDirectorySync(t *testing.T) {
	want := bytes.Repeat([]byte("s"), 271)
	for round := range 60 {
		root := t.TempDir()
		fsys, err := crashfs.New(root, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 40 { // neighbours, so that the walk takes a while
			if err := os.WriteFile(filepath.Join(root, "n"+string(rune('a'+i%26))+string(rune('a'+i/26))), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		tmp, final := filepath.Join(root, "snap.tmp"), filepath.Join(root, "snap")
		f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(want); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fsys.Rename(tmp, final); err != nil {
				t.Error(err)
			}
		}()
		for range 20 {
			if err := fsys.SyncDir(root); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		if err := fsys.SyncDir(root); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Image(); err != nil {
			t.Fatal(err)
		}
		for s := range 4 {
			dst := filepath.Join(t.TempDir(), "s")
			st, err := fsys.Materialize(dst, rand.New(rand.NewPCG(uint64(round), uint64(s))))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dst, "snap"))
			if err != nil {
				t.Fatalf("round %d state %d (%s): %v", round, s, st.Desc, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("round %d state %d (%s): the renamed file holds %d bytes %.20q, want its %d synced bytes", round, s, st.Desc, len(got), got, len(want))
			}
		}
	}
}
