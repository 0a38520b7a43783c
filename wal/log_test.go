package wal_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/walq/walq/wal"
)

func TestRoundTripAcrossRolls(t *testing.T) {
	for _, mode := range []struct {
		name string
		sync wal.SyncMode
	}{{"SyncAlways", wal.SyncAlways}, {"SyncInterval", wal.SyncInterval}, {"SyncNever", wal.SyncNever}} {
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := &wal.Options{SegmentSize: 4 << 10, MaxGroupBytes: 512, Sync: mode.sync}
			l := openLog(t, dir, opts)
			lsns := appendN(t, l, 0, 500)
			if lsns[0] != 1 || lsns[499] != 500 {
				t.Fatalf("LSNs %d..%d, want 1..500", lsns[0], lsns[499])
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := len(l.Segments()); got < 5 {
				t.Fatalf("%d segments, want several rolls", got)
			}
			checkRecords(t, l, 1, 0, 500)
			closeLog(t, l)

			l = openLog(t, dir, opts)
			defer closeLog(t, l)
			if l.FirstLSN() != 1 || l.WrittenLSN() != 500 || l.DurableLSN() != 500 || l.LastLSN() != 500 {
				t.Fatalf("after reopen First/Written/Durable/Last = %d/%d/%d/%d, want 1/500/500/500",
					l.FirstLSN(), l.WrittenLSN(), l.DurableLSN(), l.LastLSN())
			}
			checkRecords(t, l, 1, 0, 500)
			appendN(t, l, 500, 100)
			checkRecords(t, l, 1, 0, 600)
		})
	}
}

func TestStartLSN(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{StartLSN: 1000})
	if l.FirstLSN() != 1000 || l.LastLSN() != 999 || l.WrittenLSN() != 999 {
		t.Fatalf("empty log First/Last/Written = %d/%d/%d, want 1000/999/999", l.FirstLSN(), l.LastLSN(), l.WrittenLSN())
	}
	lsns := appendN(t, l, 0, 3)
	if lsns[0] != 1000 || lsns[2] != 1002 {
		t.Fatalf("LSNs %v, want 1000..1002", lsns)
	}
	closeLog(t, l)
	l = openLog(t, dir, &wal.Options{StartLSN: 5}) // ignored: the log holds records
	defer closeLog(t, l)
	if lsns := appendN(t, l, 3, 1); lsns[0] != 1003 {
		t.Fatalf("LSN after reopen %d, want 1003", lsns[0])
	}
	checkRecords(t, l, 1000, 0, 4)
}

func TestOptionsValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts wal.Options
	}{
		{"negative SegmentSize", wal.Options{SegmentSize: -1}},
		{"tiny SegmentSize", wal.Options{SegmentSize: 10}},
		{"bad Sync", wal.Options{Sync: 7}},
		{"negative SyncInterval", wal.Options{SyncInterval: -1}},
		{"negative MaxGroupBytes", wal.Options{MaxGroupBytes: -1}},
		{"negative MaxRecordSize", wal.Options{MaxRecordSize: -5}},
		{"FileMode with type bits", wal.Options{FileMode: os.ModeDir | 0o600}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := wal.Open(t.TempDir(), &tc.opts)
			if !errors.Is(err, wal.ErrInvalidOptions) {
				t.Fatalf("Open: %v, want ErrInvalidOptions", err)
			}
		})
	}
}

func TestOptionsNotMutated(t *testing.T) {
	opts := &wal.Options{SegmentSize: 4096}
	l := openLog(t, t.TempDir(), opts)
	defer closeLog(t, l)
	if *opts != (wal.Options{SegmentSize: 4096}) {
		t.Fatalf("Open changed the caller's options: %+v", *opts)
	}
}

func TestAppendErrors(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{MaxRecordSize: 100})
	if _, _, err := l.Append(make([]byte, 101)); !errors.Is(err, wal.ErrTooLarge) {
		t.Fatalf("Append(101 bytes) = %v, want ErrTooLarge", err)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("ErrTooLarge poisoned the log: %v", err)
	}
	appendN(t, l, 0, 1)
	closeLog(t, l)
	if _, _, err := l.Append([]byte("x")); !errors.Is(err, wal.ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
	if err := l.Close(); !errors.Is(err, wal.ErrClosed) {
		t.Fatalf("second Close = %v, want ErrClosed", err)
	}
	if _, err := l.Read(1); !errors.Is(err, wal.ErrClosed) {
		t.Fatalf("Read after Close = %v, want ErrClosed", err)
	}
}

func TestReadBounds(t *testing.T) {
	l := openLog(t, t.TempDir(), nil)
	defer closeLog(t, l)
	appendN(t, l, 0, 3)
	for _, lsn := range []wal.LSN{0, 4, 1 << 40} {
		if _, err := l.Read(lsn); !errors.Is(err, wal.ErrNotFound) {
			t.Errorf("Read(%d) = %v, want ErrNotFound", lsn, err)
		}
	}
	r := l.NewReader(4)
	defer r.Close()
	if _, _, err := r.Next(); err == nil || !errors.Is(err, io.EOF) {
		t.Fatalf("Next past the end = %v, want io.EOF", err)
	}
	appendN(t, l, 3, 1)
	if lsn, rec, err := r.Next(); err != nil || lsn != 4 || string(rec) != string(record(3)) {
		t.Fatalf("Next after a later append = %d %q %v", lsn, rec, err)
	}
}

// TestView: View shows each record as Read returns it, with Read's
// errors, and returns the error of its fn.
func TestView(t *testing.T) {
	l := openLog(t, t.TempDir(), &wal.Options{MaxGroupBytes: 512})
	defer closeLog(t, l)
	appendN(t, l, 0, 50)
	for lsn := wal.LSN(1); lsn <= 50; lsn++ {
		want, err := l.Read(lsn)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.View(lsn, func(rec []byte) error {
			if string(rec) != string(want) {
				t.Fatalf("View(%d) = %q, Read = %q", lsn, rec, want)
			}
			return nil
		}); err != nil {
			t.Fatalf("View(%d): %v", lsn, err)
		}
	}
	errMine := errors.New("mine")
	if err := l.View(1, func([]byte) error { return errMine }); !errors.Is(err, errMine) {
		t.Fatalf("View = %v, want fn's error", err)
	}
	if err := l.View(51, func([]byte) error { return nil }); !errors.Is(err, wal.ErrNotFound) {
		t.Fatalf("View(51) = %v, want ErrNotFound", err)
	}
}

// TestReadLargeEntries: an entry larger than a read's buffer is kept in
// Read's cache without a copy; reading other entries after it, large and
// small, leaves its records intact.
func TestReadLargeEntries(t *testing.T) {
	l := openLog(t, t.TempDir(), &wal.Options{SegmentSize: 1 << 20, MaxGroupBytes: 64 << 10})
	defer closeLog(t, l)
	var recs [][]byte
	for i := range 40 {
		size := 200
		if i%4 != 0 {
			size = 30 << 10 // an entry of one or two such records is past 16 KiB
		}
		rec := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		if _, _, err := l.Append(rec); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		for i, want := range recs {
			got, err := l.Read(wal.LSN(i + 1))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("round %d: Read(%d) = %d bytes %.8q, %v; want %d bytes %.8q", round, i+1, len(got), got, err, len(want), want)
			}
		}
	}
}

func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{SegmentSize: 4096})
	appendN(t, l, 0, 100)
	closeLog(t, l)
	before := dirSnapshot(t, dir)

	ro := openLog(t, dir, &wal.Options{ReadOnly: true})
	checkRecords(t, ro, 1, 0, 100)
	if _, _, err := ro.Append([]byte("x")); !errors.Is(err, wal.ErrReadOnly) {
		t.Fatalf("Append on read-only = %v", err)
	}
	if err := ro.TruncateFront(50); !errors.Is(err, wal.ErrReadOnly) {
		t.Fatalf("TruncateFront on read-only = %v", err)
	}
	if rep, err := ro.Verify(); err != nil || rep.Torn != nil || len(rep.Salvaged) != 0 {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
	closeLog(t, ro)
	if after := dirSnapshot(t, dir); after != before {
		t.Fatalf("read-only open changed the directory:\n%s\n%s", before, after)
	}
	if _, err := wal.Open(filepath.Join(dir, "missing"), &wal.Options{ReadOnly: true}); err == nil {
		t.Fatal("read-only Open of a missing directory succeeded")
	}
}

// dirSnapshot describes a directory's files (name, size, mode).
func dirSnapshot(t testing.TB, dir string) string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := ""
	for _, de := range des {
		fi, err := de.Info()
		if err != nil {
			t.Fatal(err)
		}
		s += fi.Name() + " " + fi.Mode().String() + " " + string(rune('0'+fi.Size()%10)) + "\n"
	}
	return s
}

// TestNoFileLeak: after Close and Reader.Close, no segment file stays open,
// even across rolls and truncations with Readers pinning removed segments.
func TestNoFileLeak(t *testing.T) {
	before := openFDs(t)
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{SegmentSize: 4 << 10, MaxGroupBytes: 512})
	appendN(t, l, 0, 300)
	r := l.NewReader(1)
	if _, _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateFront(200); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(250); err != nil {
		t.Fatal(err)
	}
	closeLog(t, l)
	r.Close()
	if after := openFDs(t); after != before {
		t.Fatalf("%d file descriptors open before, %d after", before, after)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(des)
}

func TestDirectoryLock(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, nil)
	if _, err := wal.Open(dir, nil); err == nil {
		t.Fatal("a second writable Open of the same directory succeeded")
	}
	ro := openLog(t, dir, &wal.Options{ReadOnly: true}) // tools may look
	closeLog(t, ro)
	closeLog(t, l)
	closeLog(t, openLog(t, dir, nil))
}
