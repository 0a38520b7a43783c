package wal_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/walq/walq/wal"
)

// manySegments opens a log with small segments and n records, one group
// per 512 bytes.
func manySegments(t *testing.T, dir string, n int) (*wal.Log, *wal.Options) {
	t.Helper()
	opts := &wal.Options{SegmentSize: 4 << 10, MaxGroupBytes: 512}
	l := openLog(t, dir, opts)
	appendN(t, l, 0, n)
	return l, opts
}

func TestTruncateFront(t *testing.T) {
	dir := t.TempDir()
	l, opts := manySegments(t, dir, 600)
	segs := l.Segments()
	sizeBefore := l.Size()
	if err := l.TruncateFront(1); err != nil {
		t.Fatalf("TruncateFront(1) = %v, want nil (nothing to remove)", err)
	}
	cut := wal.LSN(300)
	r := l.NewReader(1) // positioned before the truncation
	if _, _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateFront(cut); err != nil {
		t.Fatal(err)
	}
	first := l.FirstLSN()
	if first > cut || first <= 1 {
		t.Fatalf("FirstLSN %d after TruncateFront(%d)", first, cut)
	}
	after := l.Segments()
	if len(after) >= len(segs) || after[0].FirstLSN != first || l.Size() >= sizeBefore {
		t.Fatalf("segments %d -> %d, first %+v, size %d -> %d", len(segs), len(after), after[0], sizeBefore, l.Size())
	}
	if _, err := os.Stat(segs[0].Path); !os.IsNotExist(err) {
		t.Fatalf("first segment still on disk: %v", err)
	}
	checkRecords(t, l, first, int(first-1), 600-int(first-1))
	if _, err := l.Read(first - 1); !errors.Is(err, wal.ErrNotFound) {
		t.Fatalf("Read(%d) = %v, want ErrNotFound", first-1, err)
	}
	if _, _, err := l.NewReader(1).Next(); !errors.Is(err, wal.ErrNotFound) {
		t.Fatalf("new Reader at 1: %v, want ErrNotFound", err)
	}
	drainReader(t, r, first) // the old Reader finishes its segment, then finds it gone
	r.Close()

	appendN(t, l, 600, 50)
	closeLog(t, l)
	l = openLog(t, dir, opts)
	defer closeLog(t, l)
	if l.FirstLSN() != first {
		t.Fatalf("FirstLSN after reopen %d, want %d", l.FirstLSN(), first)
	}
	checkRecords(t, l, first, int(first-1), 650-int(first-1))
}

// drainReader reads until an error: ErrNotFound once it leaves the
// truncated segments (or io.EOF if it had already reached the kept ones).
func drainReader(t *testing.T, r *wal.Reader, first wal.LSN) {
	t.Helper()
	for {
		lsn, _, err := r.Next()
		if err != nil {
			if !errors.Is(err, wal.ErrNotFound) {
				t.Fatalf("old Reader: %v, want ErrNotFound", err)
			}
			return
		}
		if lsn >= first {
			return // it crossed into the kept segments: also fine
		}
	}
}

func TestTruncateFrontKeepsTail(t *testing.T) {
	dir := t.TempDir()
	l, opts := manySegments(t, dir, 300)
	if err := l.TruncateFront(1 << 50); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	last := segs[len(segs)-1]
	if l.FirstLSN() > 300 || (last.Bytes == 0 && len(segs) < 2) {
		t.Fatalf("TruncateFront past the end left FirstLSN %d, segments %+v", l.FirstLSN(), segs)
	}
	first := l.FirstLSN()
	checkRecords(t, l, first, int(first-1), 300-int(first-1))
	closeLog(t, l)
	l = openLog(t, dir, opts)
	defer closeLog(t, l)
	checkRecords(t, l, first, int(first-1), 300-int(first-1))
	appendN(t, l, 300, 1)
}

// TestInterruptedTruncation leaves the files of a TruncateFront that
// crashed after writing NAME.START (and a stray temp file); Open finishes
// it the way tidwall/wal would.
func TestInterruptedTruncation(t *testing.T) {
	dir := t.TempDir()
	l, opts := manySegments(t, dir, 600)
	segs := l.Segments()
	closeLog(t, l)
	keep := segs[3]
	b, err := os.ReadFile(keep.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keep.Path+".START", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000099.START.TEMP"), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	ro := openLog(t, dir, &wal.Options{ReadOnly: true}) // reads through the START file
	if ro.FirstLSN() != keep.FirstLSN {
		t.Fatalf("read-only FirstLSN %d, want %d", ro.FirstLSN(), keep.FirstLSN)
	}
	checkRecords(t, ro, keep.FirstLSN, int(keep.FirstLSN-1), 600-int(keep.FirstLSN-1))
	closeLog(t, ro)

	l = openLog(t, dir, opts)
	defer closeLog(t, l)
	if l.FirstLSN() != keep.FirstLSN {
		t.Fatalf("FirstLSN %d, want %d", l.FirstLSN(), keep.FirstLSN)
	}
	for _, s := range segs[:3] {
		if _, err := os.Stat(s.Path); !os.IsNotExist(err) {
			t.Fatalf("%s survived the finished truncation", s.Path)
		}
	}
	for _, name := range []string{filepath.Base(keep.Path) + ".START", "00000000000000000099.START.TEMP"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Fatalf("%s still there", name)
		}
	}
	checkRecords(t, l, keep.FirstLSN, int(keep.FirstLSN-1), 600-int(keep.FirstLSN-1))
}
