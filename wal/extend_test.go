package wal_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/wal"
)

// writtenEnd returns the offset after the last entry of the segment file
// at path, and the file's bytes.
func writtenEnd(t *testing.T, dir, path string) (int64, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end := int64(0)
	for _, e := range layoutOf(t, dir) {
		if e.seg == path {
			end = e.off + e.size
		}
	}
	return end, b
}

// TestTailExtendedWithZeros: while a log is open, its tail file reaches
// past the last entry with zeros (written and fsynced before the records
// that overwrite them), so that a record's fdatasync carries no new file
// size; Close cuts them, and the log ends at its last entry.
func TestTailExtendedWithZeros(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{Sync: wal.SyncAlways})
	appendN(t, l, 0, 100)
	tail := segmentFiles(t, dir)[0]
	end, b := writtenEnd(t, dir, tail)
	if int64(len(b))-end < 4096 {
		t.Fatalf("tail holds %d bytes, its entries end at %d: no zeros ahead of the entries", len(b), end)
	}
	if bytes.ContainsFunc(b[end:], func(r rune) bool { return r != 0 }) {
		t.Fatalf("the bytes after the last entry, at %d, are not zeros", end)
	}
	closeLog(t, l)
	// The log may have written a witness (26 bytes) after the first look,
	// once it stayed idle: the entries end there or later, never before.
	if end2, b := writtenEnd(t, dir, tail); int64(len(b)) != end2 || end2 < end {
		t.Fatalf("after Close the tail holds %d bytes, its entries end at %d (%d before Close): the zeros were not cut", len(b), end2, end)
	}
	l = openLog(t, dir, nil)
	defer closeLog(t, l)
	if rep := l.Report(); rep.Torn != nil {
		t.Fatalf("Open after Close reports a torn tail: %+v", rep.Torn)
	}
	checkRecords(t, l, 1, 0, 100)
}

// TestRollCutsSealedZeros: a roll leaves the sealed segment ending at its
// last entry, and the new tail is extended in turn.
func TestRollCutsSealedZeros(t *testing.T) {
	dir := t.TempDir()
	opts := &wal.Options{Sync: wal.SyncAlways, SegmentSize: 60000} // not a whole number of pages
	l := openLog(t, dir, opts)
	rec := bytes.Repeat([]byte("r"), 1000)
	for i := range 300 {
		_, c, err := l.Append(rec)
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			t.Fatalf("record %d: %v", i+1, err)
		}
	}
	segs := segmentFiles(t, dir)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want 3 at least", len(segs))
	}
	for _, s := range segs[:len(segs)-1] {
		if end, b := writtenEnd(t, dir, s); int64(len(b)) != end {
			t.Fatalf("sealed %s holds %d bytes, its last entry ends at %d", filepath.Base(s), len(b), end)
		}
	}
	if end, b := writtenEnd(t, dir, segs[len(segs)-1]); int64(len(b)) <= end {
		t.Fatalf("the tail after a roll holds %d bytes, its entries end at %d: not extended", len(b), end)
	}
	closeLog(t, l)
	l = openLog(t, dir, opts)
	defer closeLog(t, l)
	if _, err := l.Verify(); err != nil {
		t.Fatal(err)
	}
	if l.WrittenLSN() != 300 {
		t.Fatalf("WrittenLSN %d, want 300", l.WrittenLSN())
	}
}

// TestReadOnlyBesideExtendedTail: a read-only open of a live, idle log,
// whose tail holds zeros past its entries, takes them for the end of the log:
// no torn tail, no damage for Verify, and its Readers deliver the records
// alone.
func TestReadOnlyBesideExtendedTail(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{Sync: wal.SyncAlways})
	defer closeLog(t, l)
	appendN(t, l, 0, 50)
	if err := l.Flush(); err != nil { // the witness written: the log stays idle, no write in flight
		t.Fatal(err)
	}
	ro := openLog(t, dir, &wal.Options{ReadOnly: true})
	defer closeLog(t, ro)
	if rep := ro.Report(); rep.Torn != nil || len(rep.Salvaged) > 0 {
		t.Fatalf("read-only Open reports damage: Torn %+v, Salvaged %+v", rep.Torn, rep.Salvaged)
	}
	if rep, err := ro.Verify(); err != nil || rep.Torn != nil {
		t.Fatalf("Verify of the read-only Log: %v, Torn %+v", err, rep.Torn)
	}
	checkRecords(t, ro, 1, 0, 50)
}

// TestExtenderFailurePoisons: a failed write, fsync or truncate of the
// zeros ahead of the tail poisons the log, as any failed write does.
func TestExtenderFailurePoisons(t *testing.T) {
	for _, kind := range []string{"write", "fsync", "truncate"} {
		t.Run(kind, func(t *testing.T) {
			fs := faultfs.New(0)
			l, err := wal.Open(t.TempDir(), &wal.Options{FS: fs, Sync: wal.SyncAlways})
			if err != nil {
				t.Fatal(err)
			}
			if kind != "truncate" {
				fs.FailNext(kind) // the extension's: tidwall/wal writes the record around FS, and the zeros are fdatasynced before it
			}
			_, c, err := l.Append([]byte("x"))
			if err == nil {
				err = c.Wait()
			}
			if kind == "truncate" {
				if err != nil {
					t.Fatal(err)
				}
				fs.FailNext(kind) // Close's cut of the zeros
				if err := l.Close(); !errors.Is(err, faultfs.ErrInjected) {
					t.Fatalf("Close after a failed cut of the zeros: %v, want the injected failure", err)
				}
				return
			}
			defer l.Close()
			if !errors.Is(err, faultfs.ErrInjected) && !errors.Is(l.Err(), faultfs.ErrInjected) {
				t.Fatalf("after a failed %s of the zeros: Wait %v, Err %v; want the log poisoned", kind, err, l.Err())
			}
			if _, _, err := l.Append([]byte("y")); err == nil {
				t.Fatalf("Append after a failed %s of the zeros succeeded", kind)
			}
		})
	}
}

// TestZerosStopAtSegmentSize: the zeros ahead of the tail never reach
// past SegmentSize, where the segment's last entry ends at the latest
// (tidwall/wal rolls at the entry that takes it there). So no sealed
// segment is left holding zeros after its last entry: a crash that lost
// a roll's cut of them would leave them in a segment Open does not trim
// when the same batch rolled again, and Open would refuse the log
// ("LSN discontinuity").
func TestZerosStopAtSegmentSize(t *testing.T) {
	dir := t.TempDir()
	const segSize = 60000 // not a whole number of pages
	l := openLog(t, dir, &wal.Options{Sync: wal.SyncAlways, SegmentSize: segSize})
	defer closeLog(t, l)
	rec := bytes.Repeat([]byte("r"), 1000)
	for i := range 200 {
		_, c, err := l.Append(rec)
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			t.Fatalf("record %d: %v", i+1, err)
		}
		segs := segmentFiles(t, dir)
		tail := segs[len(segs)-1]
		end, b := writtenEnd(t, dir, tail)
		if int64(len(b)) > max(end, segSize) {
			t.Fatalf("after record %d the tail %s holds %d bytes, its entries end at %d: zeros past SegmentSize %d",
				i+1, filepath.Base(tail), len(b), end, segSize)
		}
	}
}

// TestNoZerosUnderSyncNever: under SyncNever the tail is written by
// appending alone. No fsync is saved there by zeros ahead, which would
// only cost a write and an fdatasync of their own.
func TestNoZerosUnderSyncNever(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{Sync: wal.SyncNever})
	appendN(t, l, 0, 100)
	tail := segmentFiles(t, dir)[0]
	if end, b := writtenEnd(t, dir, tail); int64(len(b)) != end {
		t.Fatalf("the tail holds %d bytes, its entries end at %d: zeros written ahead", len(b), end)
	}
	closeLog(t, l)
}
