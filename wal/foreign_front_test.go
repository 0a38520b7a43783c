package wal_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walq/walq/wal"
)

// TestForeignFrontFile: a NAME.FRONT file is what walq's TruncateFront
// leaves when a crash interrupts it, and it names the first segment kept,
// which exists as long as the marker does. One that names no segment (past
// the tail, or inside a segment's entries, where no segment starts) is not
// that: finishing it would remove every segment before NAME, acknowledged
// records among them (all of them, for one past the tail). Open, writable,
// read-only or salvaging, must refuse it and change nothing; once it is
// moved out, every record is there.
func TestForeignFrontFile(t *testing.T) {
	for _, c := range []struct {
		name  string
		index func(segs []wal.SegmentInfo) uint64 // the marker's index
	}{
		{"past the tail", func(segs []wal.SegmentInfo) uint64 { return segIndexOf(t, segs[len(segs)-1].Path) + 5 }},
		{"inside a sealed segment", func(segs []wal.SegmentInfo) uint64 { return segIndexOf(t, segs[1].Path) + 1 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			segs := rolledLog(t, dir)
			before := readSegments(t, dir)
			marker := filepath.Join(dir, fmt.Sprintf("%020d.FRONT", c.index(segs)))
			if err := os.WriteFile(marker, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, o := range []struct {
				name string
				opts wal.Options
			}{
				{"writable", wal.Options{SegmentSize: 1024}},
				{"read-only", wal.Options{ReadOnly: true}},
				{"salvaging", wal.Options{Salvage: true, SegmentSize: 1024}},
				{"read-only salvaging", wal.Options{ReadOnly: true, Salvage: true}},
			} {
				l, err := wal.Open(dir, &o.opts)
				if err == nil {
					t.Errorf("%s Open with a FRONT file that names no segment: opened with LSNs %d-%d; want ErrCorrupt and ErrForeign",
						o.name, l.FirstLSN(), l.LastLSN())
					l.Close()
				} else if !errors.Is(err, wal.ErrCorrupt) || !errors.Is(err, wal.ErrForeign) || !strings.Contains(err.Error(), filepath.Base(marker)) {
					t.Errorf("%s Open with a FRONT file that names no segment: %v; want ErrCorrupt and ErrForeign naming %s",
						o.name, err, filepath.Base(marker))
				}
				if after := readSegments(t, dir); !sameSegments(before, after) {
					t.Fatalf("%s Open changed the segments: %d files before, %d after", o.name, len(before), len(after))
				}
			}
			if err := os.Remove(marker); err != nil {
				t.Fatal(err)
			}
			l := openLog(t, dir, &wal.Options{SegmentSize: 1024})
			defer closeLog(t, l)
			if first, last := l.FirstLSN(), l.LastLSN(); first != segs[0].FirstLSN || last < segs[len(segs)-1].FirstLSN {
				t.Fatalf("once the FRONT file is moved out the log holds LSNs %d-%d; want %d on, past %d",
					first, last, segs[0].FirstLSN, segs[len(segs)-1].FirstLSN)
			}
			for lsn := first(segs); lsn <= l.LastLSN(); lsn++ {
				if _, err := l.Read(lsn); err != nil {
					t.Fatalf("Read(%d) once the FRONT file is moved out: %v", lsn, err)
				}
			}
		})
	}
}

// first returns the LSN of the log's first record.
func first(segs []wal.SegmentInfo) wal.LSN { return segs[0].FirstLSN }

// segIndexOf returns the index a segment file is named by.
func segIndexOf(t *testing.T, path string) uint64 {
	t.Helper()
	var n uint64
	if _, err := fmt.Sscanf(filepath.Base(path), "%d", &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// readSegments returns the bytes of every segment file in dir, by name.
func readSegments(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := make(map[string][]byte)
	for _, p := range segmentFiles(t, dir) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

// sameSegments reports whether two readSegments results are equal.
func sameSegments(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// TestFrontListedWithoutItsSegment: beside a writer, a listing torn by
// the writer's changes (see listing.go) can hold the NAME.FRONT of a
// truncation that keeps only a tail the writer's roll created during the
// listing, and miss that tail. That marker is walq's, not foreign: the
// read-only Open lists again, and opens the log as the writer left it.
func TestFrontListedWithoutItsSegment(t *testing.T) {
	dir := t.TempDir()
	segs := rolledLog(t, dir)
	tail := segs[len(segs)-1]
	marker := tail.Path + ".FRONT"
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	hook := func(call int, des []os.DirEntry) []os.DirEntry {
		if call != 1 {
			return des
		}
		// The writer finishes its truncation after this listing: the
		// older segments and the marker go.
		for _, s := range segs[:len(segs)-1] {
			if err := os.Remove(s.Path); err != nil {
				panic(err)
			}
		}
		if err := os.Remove(marker); err != nil {
			panic(err)
		}
		return without(des, filepath.Base(tail.Path)) // torn: the tail was created during the listing
	}
	l, err := wal.Open(dir, &wal.Options{ReadOnly: true, FS: &listingFS{hook: hook}})
	if err != nil {
		t.Fatalf("read-only Open beside a writer whose listing held a FRONT without its segment: %v", err)
	}
	defer closeLog(t, l)
	if l.FirstLSN() != tail.FirstLSN {
		t.Fatalf("FirstLSN %d, want the tail's %d", l.FirstLSN(), tail.FirstLSN)
	}
	for lsn := l.FirstLSN(); lsn <= l.LastLSN(); lsn++ {
		if _, err := l.Read(lsn); err != nil {
			t.Fatalf("Read(%d): %v", lsn, err)
		}
	}
}
