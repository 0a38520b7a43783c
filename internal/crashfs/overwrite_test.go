package crashfs_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/walq/walq/internal/crashfs"
)

// TestTornOverwrite checks the model of a write over synced bytes: after
// the power loss each 512-byte sector of it holds its synced bytes or its
// new ones, never anything else; every mix happens, the later write kept
// without the earlier one included; bytes appended after it are modelled
// as before; new bytes kept after lost ones are reported as a hole; and
// an overwrite synced before the crash always stays.
func TestTornOverwrite(t *testing.T) {
	root := t.TempDir()
	fsys, err := crashfs.New(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fsys.OpenFile(filepath.Join(root, "seg"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, f, bytes.Repeat([]byte("A"), 2*4096), 0)
	mustNil(t, f.Sync())
	g, err := fsys.OpenFile(filepath.Join(root, "synced"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, g, bytes.Repeat([]byte("X"), 1024), 0)
	mustNil(t, g.Sync())
	writeAt(t, g, bytes.Repeat([]byte("Y"), 1024), 0)
	mustNil(t, g.Datasync()) // the overwrite is durable
	mustNil(t, fsys.SyncDir(root))
	writeAt(t, f, bytes.Repeat([]byte("B"), 4096), 0)    // first page
	writeAt(t, f, bytes.Repeat([]byte("C"), 4096), 4096) // second page, written after
	writeAt(t, f, []byte("appended"), 2*4096)
	if err := fsys.Image(); err != nil {
		t.Fatal(err)
	}

	seen := map[string]int{}
	for i := range 300 {
		dst := filepath.Join(t.TempDir(), "s")
		st, err := fsys.Materialize(dst, rand.New(rand.NewPCG(4, uint64(i))))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(dst, "synced")); !bytes.Equal(got, bytes.Repeat([]byte("Y"), 1024)) {
			t.Fatalf("state %d (%s): a synced overwrite was lost: %.16q…", i, st.Desc, got)
		}
		got, err := os.ReadFile(filepath.Join(dst, "seg"))
		if err != nil || len(got) < 2*4096 {
			t.Fatalf("state %d (%s): seg = %d bytes, %v; want its 8192 synced bytes at least", i, st.Desc, len(got), err)
		}
		var sectors [16]byte // what each sector holds: 'A' synced, 'B' or 'C' new
		for s := range sectors {
			sec := got[s*512 : (s+1)*512]
			if sec[0] != 'A' && sec[0] != "BC"[s/8] || !bytes.Equal(sec, bytes.Repeat(sec[:1], 512)) {
				t.Fatalf("state %d (%s): sector %d holds %.16q…, neither its synced nor its new bytes", i, st.Desc, s, sec)
			}
			sectors[s] = sec[0]
		}
		first, second := string(sectors[:8]), string(sectors[8:])
		switch {
		case first == "AAAAAAAA" && second == "AAAAAAAA":
			seen["both lost"]++
		case first == "BBBBBBBB" && second == "CCCCCCCC":
			seen["both kept"]++
		case first == "AAAAAAAA" && second == "CCCCCCCC":
			seen["the later write without the earlier"]++
			if !st.Holes {
				t.Fatalf("state %d (%s): new bytes after lost ones, and no hole reported", i, st.Desc)
			}
		case first == "BBBBBBBB" && second == "AAAAAAAA":
			seen["the earlier write without the later"]++
		case first != "AAAAAAAA" && first != "BBBBBBBB":
			seen["a page torn between its sectors"]++
		}
		if len(got) > 2*4096 && bytes.HasPrefix(got[2*4096:], []byte("appended")) {
			seen["the append kept"]++
			if bytes.IndexByte(sectors[:], 'A') >= 0 && !st.Holes {
				t.Fatalf("state %d (%s): appended bytes kept after a lost overwrite, and no hole reported", i, st.Desc)
			}
		}
	}
	for _, k := range []string{"both lost", "both kept", "the later write without the earlier",
		"the earlier write without the later", "a page torn between its sectors", "the append kept"} {
		if seen[k] == 0 {
			t.Errorf("no state with %s: %v", k, seen)
		}
	}
}

func writeAt(t *testing.T, f interface {
	WriteAt([]byte, int64) (int, error)
}, p []byte, off int64) {
	t.Helper()
	if _, err := f.WriteAt(p, off); err != nil {
		t.Fatal(err)
	}
}

// TestOverwriteThenCut checks that a write over synced bytes followed by a
// cut of the file below its synced size (a log cutting the zeros it laid
// ahead of its tail) may still reach the disk: the page cache can write the
// new bytes back before the cut is durable. The cut itself is modelled as
// before: the file keeps its synced size.
func TestOverwriteThenCut(t *testing.T) {
	root := t.TempDir()
	fsys, err := crashfs.New(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fsys.OpenFile(filepath.Join(root, "seg"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, f, make([]byte, 2*4096), 0)
	mustNil(t, f.Sync())
	mustNil(t, fsys.SyncDir(root))
	writeAt(t, f, bytes.Repeat([]byte("B"), 4096), 0)
	mustNil(t, f.Truncate(4096))
	if err := fsys.Image(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i := range 100 {
		dst := filepath.Join(t.TempDir(), "s")
		st, err := fsys.Materialize(dst, rand.New(rand.NewPCG(5, uint64(i))))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dst, "seg"))
		if err != nil || len(got) != 2*4096 {
			t.Fatalf("state %d (%s): seg = %d bytes, %v; want its 8192 synced bytes", i, st.Desc, len(got), err)
		}
		switch {
		case bytes.Equal(got[:4096], make([]byte, 4096)):
			seen["the overwrite lost"]++
		case bytes.Equal(got[:4096], bytes.Repeat([]byte("B"), 4096)):
			seen["the overwrite kept"]++
		}
		if !bytes.Equal(got[4096:], make([]byte, 4096)) {
			t.Fatalf("state %d (%s): the synced bytes past the cut changed", i, st.Desc)
		}
	}
	for _, k := range []string{"the overwrite lost", "the overwrite kept"} {
		if seen[k] == 0 {
			t.Errorf("no state with %s: %v", k, seen)
		}
	}
}
