package wal_test

import (
	"errors"
	"os"
	"testing"

	"github.com/walq/walq/wal"
)

// TestStartOverTornTail: an older walq truncated its log's front at the
// tail segment (the compaction's snapshot reached into it) with
// tidwall/wal's TruncateFront, which copies the kept segment's entries to
// NAME.START and fsyncs that copy, but not the tail itself. A power loss
// before the old segments went can then leave the copy whole beside a
// tail that lost its unsynced bytes, cut short or zero-filled: a copy
// walq began, which holds the only whole copy of those entries. Every Open
// must take it, not refuse it as another log's file, and the records from
// NAME on must be there. A copy of other entries there (here the first
// segment's), which does not follow on from the segment before, is still
// refused.
func TestStartOverTornTail(t *testing.T) {
	for _, c := range []struct {
		name string
		tear func(b []byte) []byte // what the power loss left of the tail
	}{
		{"tail cut to nothing", func([]byte) []byte { return nil }},
		{"tail zero-filled", func(b []byte) []byte { return make([]byte, len(b)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l, opts := manySegments(t, dir, 600)
			n := appendIntoTail(t, l, 600, 5)
			segs := l.Segments()
			closeLog(t, l)
			keep := segs[len(segs)-1]
			if len(segs) < 4 {
				t.Fatalf("%d segments, the tail %s holds %d bytes; want 4 or more, records in the tail", len(segs), keep.Path, keep.Bytes)
			}
			b, err := os.ReadFile(keep.Path)
			if err != nil {
				t.Fatal(err)
			}
			other, err := os.ReadFile(segs[0].Path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(keep.Path, c.tear(b), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(keep.Path+".START", other, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, o := range []wal.Options{*opts, {ReadOnly: true}} {
				if _, err := wal.Open(dir, &o); !errors.Is(err, wal.ErrForeign) {
					t.Fatalf("Open(ReadOnly %v) beside a START file of the first segment's entries: %v; want ErrForeign", o.ReadOnly, err)
				}
			}
			if err := os.WriteFile(keep.Path+".START", b, 0o600); err != nil {
				t.Fatal(err)
			}
			ro, err := wal.Open(dir, &wal.Options{ReadOnly: true, SegmentSize: opts.SegmentSize})
			if err != nil {
				t.Fatalf("read-only Open beside the truncation's copy: %v", err)
			}
			checkRecords(t, ro, keep.FirstLSN, int(keep.FirstLSN-1), n-int(keep.FirstLSN-1))
			closeLog(t, ro)
			l, err = wal.Open(dir, opts)
			if err != nil {
				t.Fatalf("Open beside the truncation's copy: %v", err)
			}
			defer closeLog(t, l)
			if l.FirstLSN() != keep.FirstLSN {
				t.Fatalf("FirstLSN %d, want %d", l.FirstLSN(), keep.FirstLSN)
			}
			checkRecords(t, l, keep.FirstLSN, int(keep.FirstLSN-1), n-int(keep.FirstLSN-1))
		})
	}
}

// appendIntoTail appends records first..first+n-1, and more one at a time
// while the tail segment holds no bytes: where a roll falls depends on how
// the committer grouped the records, which varies with timing, and a write
// can end just past a segment's size and roll to an empty tail. It returns
// the number of records in the log, first + the records it appended.
func appendIntoTail(t *testing.T, l *wal.Log, first, n int) int {
	t.Helper()
	appendN(t, l, first, n)
	next := first + n
	for segs := l.Segments(); segs[len(segs)-1].Bytes == 0; segs = l.Segments() {
		if next > first+1000 {
			t.Fatalf("tail %s still empty after %d records", segs[len(segs)-1].Path, next-first)
		}
		appendN(t, l, next, 1)
		next++
	}
	return next
}
