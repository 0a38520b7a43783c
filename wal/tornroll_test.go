package wal_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walq/walq/wal"
)

// rolledLog writes a log whose tail holds entries after at least two
// sealed segments, closes it and returns its segments. Every entry holds
// one record (MaxGroupBytes 1), so however the committer gathers the
// appends, every sealed segment holds at least eight entries: a framed
// entry takes at most 130 bytes, and a segment rolls at the entry that
// takes it to 1024.
func rolledLog(t *testing.T, dir string) []wal.SegmentInfo {
	t.Helper()
	l := openLog(t, dir, &wal.Options{SegmentSize: 1024, MaxGroupBytes: 1})
	appendN(t, l, 0, 60)
	segs := l.Segments()
	for i := 60; segs[len(segs)-1].Bytes == 0 || len(segs) < 3; i++ {
		appendN(t, l, i, 1)
		segs = l.Segments()
	}
	closeLog(t, l)
	return segs
}

// TestTornRoll: the last sealed segment cut short (torn mid-entry, or
// emptied) under an empty or zero-filled tail that the same roll created
// is a torn tail one segment back: Open removes the tail, cuts the sealed
// segment, reports it, and the log goes on from there.
func TestTornRoll(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep func(size int64) int64 // bytes of the sealed segment kept
		tail int64                  // zeros left in the tail
	}{
		{"torn mid-entry, empty tail", func(size int64) int64 { return size - 7 }, 0},
		{"torn mid-entry, zeros in the tail", func(size int64) int64 { return size - 7 }, 300},
		{"emptied", func(int64) int64 { return 0 }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			segs := rolledLog(t, dir)
			sealed, tail := segs[len(segs)-2], segs[len(segs)-1]
			if err := os.Truncate(sealed.Path, tc.keep(sealed.Bytes)); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(tail.Path, make([]byte, tc.tail), 0o600); err != nil {
				t.Fatal(err)
			}
			l := openLog(t, dir, &wal.Options{SegmentSize: 1024})
			torn := l.Report().Torn
			if torn == nil || !strings.Contains(torn.Reason, "segment roll") || torn.Segment != sealed.Path {
				t.Fatalf("Report().Torn = %+v; want the torn roll of %s", torn, sealed.Path)
			}
			if _, err := os.Stat(tail.Path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the tail after the torn roll is still there: %v", err)
			}
			if last := l.LastLSN(); last >= sealed.FirstLSN+100 || last+1 < segs[len(segs)-3].FirstLSN {
				t.Fatalf("LastLSN %d after the repair", last)
			}
			next := appendN(t, l, 1000, 1)[0]
			closeLog(t, l)
			l = openLog(t, dir, &wal.Options{SegmentSize: 1024})
			defer closeLog(t, l)
			if got, err := l.Read(next); err != nil || string(got) != string(record(1000)) {
				t.Fatalf("Read(%d) after the repair = %q, %v", next, got, err)
			}
		})
	}
}

// TestTornRollNotGuessed: a sealed segment torn at its end under a tail
// that holds entries is what mid-log damage looks like (a valid entry
// follows the damage): Open refuses it and removes nothing.
func TestTornRollNotGuessed(t *testing.T) {
	dir := t.TempDir()
	segs := rolledLog(t, dir)
	sealed, tail := segs[len(segs)-2], segs[len(segs)-1]
	if err := os.Truncate(sealed.Path, sealed.Bytes-7); err != nil {
		t.Fatal(err)
	}
	if _, err := wal.Open(dir, &wal.Options{SegmentSize: 1024}); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("Open: %v; want ErrCorrupt", err)
	}
	if fi, err := os.Stat(tail.Path); err != nil || fi.Size() != tail.Bytes {
		t.Fatalf("the tail was touched: %v", err)
	}
}

// TestTornRollNotGuessedMidSegment: damage in the last sealed segment
// followed by valid entries in it is corruption, not a torn roll, even
// under an empty tail: Open refuses it and removes nothing.
func TestTornRollNotGuessedMidSegment(t *testing.T) {
	dir := t.TempDir()
	segs := rolledLog(t, dir)
	sealed, tail := segs[len(segs)-2], segs[len(segs)-1]
	b, err := os.ReadFile(sealed.Path)
	if err != nil {
		t.Fatal(err)
	}
	frames := frameSpans(t, b)
	if len(frames) < 2 {
		t.Fatalf("the sealed segment holds %d entries; the test needs a valid one after the damaged one", len(frames))
	}
	first := frames[0]
	b[(first[0]+first[1])/2] ^= 0xff // inside the first entry
	if err := os.WriteFile(sealed.Path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(tail.Path, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := wal.Open(dir, &wal.Options{SegmentSize: 1024}); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("Open: %v; want ErrCorrupt", err)
	}
	if _, err := os.Stat(tail.Path); err != nil {
		t.Fatalf("the tail was removed: %v", err)
	}
}

// frameSpans splits a segment file's bytes into tidwall/wal frames
// (| uvarint(len(entry)) | entry |) and returns each entry's [start, end).
func frameSpans(t *testing.T, b []byte) [][2]int {
	t.Helper()
	var spans [][2]int
	for off := 0; off < len(b); {
		n, k := binary.Uvarint(b[off:])
		if k <= 0 || n == 0 || n > uint64(len(b)-off-k) {
			t.Fatalf("no frame at offset %d", off)
		}
		start := off + k
		off = start + int(n)
		spans = append(spans, [2]int{start, off})
	}
	return spans
}

// TestFrontMarker: a NAME.FRONT file left by a crash during TruncateFront
// says the segments before NAME were being removed: Open (read-only too)
// starts the log at NAME, and a writable Open finishes the removal.
func TestFrontMarker(t *testing.T) {
	dir := t.TempDir()
	segs := rolledLog(t, dir)
	keep := segs[1]
	marker := keep.Path + ".FRONT"
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ro := openLog(t, dir, &wal.Options{ReadOnly: true})
	if got := ro.FirstLSN(); got != keep.FirstLSN {
		t.Fatalf("read-only FirstLSN = %d, want %d", got, keep.FirstLSN)
	}
	closeLog(t, ro)
	l := openLog(t, dir, &wal.Options{SegmentSize: 1024})
	defer closeLog(t, l)
	if got := l.FirstLSN(); got != keep.FirstLSN {
		t.Fatalf("FirstLSN = %d, want %d", got, keep.FirstLSN)
	}
	for _, p := range []string{segs[0].Path, marker} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s is still there: %v", filepath.Base(p), err)
		}
	}
}

// TestTornRollNotGuessedMissingSegment: a whole sealed segment (at least
// SegmentSize, as every segment tidwall/wal seals is) under an empty tail
// named past its end means a segment between them is missing, not a torn
// roll: Open refuses it and removes nothing, so the records of the missing
// segment are never silently given up and their LSNs never given again.
func TestTornRollNotGuessedMissingSegment(t *testing.T) {
	dir := t.TempDir()
	segs := rolledLog(t, dir)
	if len(segs) < 4 {
		t.Fatalf("rolledLog made %d segments, want at least 4", len(segs))
	}
	whole, missing, tail := segs[len(segs)-3], segs[len(segs)-2], segs[len(segs)-1]
	if whole.Bytes < 1024 {
		t.Fatalf("the sealed segment %s holds %d bytes, below SegmentSize", whole.Path, whole.Bytes)
	}
	if err := os.Remove(missing.Path); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(tail.Path, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := wal.Open(dir, &wal.Options{SegmentSize: 1024}); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("Open: %v; want ErrCorrupt", err)
	}
	if _, err := os.Stat(tail.Path); err != nil {
		t.Fatalf("the tail was removed: %v", err)
	}
}

// TestTornRollReadOnlyAndSalvage: a torn roll (the last sealed segment lost
// its last entry, whole or in part, under the empty tail the roll created)
// is repaired by a plain Open, and so by a salvaging Open; a read-only
// Open, salvaging or not, reports it and changes nothing. A writable Open
// gives the next record an LSN no record left in the log has, and a
// reopen reads it.
func TestTornRollReadOnlyAndSalvage(t *testing.T) {
	for _, c := range []struct {
		name string
		lost int                    // entries lost, from the end
		cut  func(e entryPos) int64 // bytes kept, given the first entry lost
	}{
		{"entry boundary", 1, func(e entryPos) int64 { return e.off }},
		{"mid entry", 1, func(e entryPos) int64 { return e.off + e.size/2 }},
		{"one byte short", 1, func(e entryPos) int64 { return e.off + e.size - 1 }},
		// Too few bytes left to have held both entries the tail's name
		// counts: a salvage repairs it as a torn roll, as a plain Open does.
		{"two entries, ten bytes kept", 2, func(e entryPos) int64 { return e.off + 10 }},
	} {
		for _, salvage := range []bool{false, true} {
			for _, ro := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/salvage=%v/ro=%v", c.name, salvage, ro), func(t *testing.T) {
					src, lay := pristine(t)
					dir := t.TempDir()
					copyDir(t, src, dir)
					if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d", len(lay)+1)), nil, 0o600); err != nil {
						t.Fatal(err)
					}
					last := lay[len(lay)-c.lost]
					if err := os.Truncate(filepath.Join(dir, filepath.Base(last.seg)), c.cut(last)); err != nil {
						t.Fatal(err)
					}
					before := dirState(t, dir)
					opts := harnessOpts
					opts.Salvage, opts.ReadOnly = salvage, ro
					l, err := wal.Open(dir, &opts)
					if err != nil {
						t.Fatalf("Open: %v", err)
					}
					if rep := l.Report(); rep.Torn == nil && len(rep.Salvaged) == 0 {
						t.Errorf("Report() = %+v, want the loss of the entry of LSN %d", rep, last.first)
					}
					if ro {
						closeLog(t, l)
						if after := dirState(t, dir); after != before {
							t.Errorf("a read-only Open changed the directory:\n%s\nnow\n%s", before, after)
						}
						return
					}
					lsn := appendN(t, l, harnessRecords, 1)[0]
					if lsn < last.first {
						t.Errorf("next LSN %d, below the lost entry's LSN %d", lsn, last.first)
					}
					closeLog(t, l)
					l = openLog(t, dir, &opts)
					defer closeLog(t, l)
					if got, err := l.Read(lsn); err != nil || string(got) != string(record(harnessRecords)) {
						t.Errorf("Read(%d) after a reopen = %q, %v", lsn, got, err)
					}
				})
			}
		}
	}
}

// dirState lists the files of dir with their sizes.
func dirState(t *testing.T, dir string) string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, de := range des {
		fi, err := de.Info()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %d\n", de.Name(), fi.Size())
	}
	return b.String()
}

// TestTornRollSalvageOneEntrySegment: the log's first segment holds one
// entry larger than SegmentSize, which made the roll, and a crash during
// the roll tore it (cut short, or its bytes zeros) under the empty tail
// the roll created. Nothing of it was acknowledged and no record in the
// log tells its LSNs: a salvaging Open repairs it as a plain Open does,
// read-only or not, and the log goes on at the LSN the torn entry had.
func TestTornRollSalvageOneEntrySegment(t *testing.T) {
	tears := []struct {
		name string
		tear func(t *testing.T, path string)
	}{
		{"cut short", func(t *testing.T, path string) {
			if err := os.Truncate(path, 2500); err != nil {
				t.Fatal(err)
			}
		}},
		{"zeros", func(t *testing.T, path string) {
			if err := os.WriteFile(path, make([]byte, 2500), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tears {
		for _, start := range []wal.LSN{0, 5000} {
			for _, mode := range []struct{ salvage, ro bool }{{false, false}, {true, false}, {true, true}, {false, true}} {
				t.Run(fmt.Sprintf("%s/start=%d/salvage=%v/ro=%v", tc.name, start, mode.salvage, mode.ro), func(t *testing.T) {
					dir := t.TempDir()
					opts := harnessOpts
					opts.StartLSN = start
					l := openLog(t, dir, &opts)
					lsn, c, err := l.Append(make([]byte, 5000))
					if err != nil || c.Wait() != nil {
						t.Fatalf("Append: %v", err)
					}
					closeLog(t, l)
					segs := segmentFiles(t, dir)
					if len(segs) != 2 {
						t.Fatalf("%d segments, want 2", len(segs))
					}
					if err := os.Truncate(segs[1], 0); err != nil {
						t.Fatal(err)
					}
					tc.tear(t, segs[0])
					before := dirState(t, dir)
					ropts := opts
					ropts.Salvage, ropts.ReadOnly = mode.salvage, mode.ro
					l, err = wal.Open(dir, &ropts)
					if err != nil {
						t.Fatalf("Open after a torn roll: %v", err)
					}
					if rep := l.Report(); rep.Torn == nil || len(rep.Salvaged) != 0 {
						t.Errorf("Report() = %+v, want the torn entry in Torn only", rep)
					}
					if mode.ro {
						closeLog(t, l)
						if after := dirState(t, dir); after != before {
							t.Errorf("a read-only Open changed the directory:\n%s\nnow\n%s", before, after)
						}
						return
					}
					if next := appendN(t, l, 1, 1)[0]; next != lsn {
						t.Errorf("next LSN %d, want %d, the torn entry's, as a plain Open gives", next, lsn)
					}
					closeLog(t, l)
					if _, err := os.Stat(segs[1]); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("the roll's empty tail %s is still there: %v", filepath.Base(segs[1]), err)
					}
				})
			}
		}
	}
}

// TestTornRollNotGuessedSizeUnknown: a whole sealed segment, then a
// missing one, then the empty tail. A salvaging or read-only Open that is
// not told SegmentSize (a tool opening a log another program wrote: the
// default is not the writer's size) never takes the state for a torn roll
// at an entry boundary, which would give out again the LSNs the missing
// segment's entries had: it refuses, or resumes past them. Told the
// writer's SegmentSize, it finds the sealed segment full: not torn.
func TestTornRollNotGuessedSizeUnknown(t *testing.T) {
	src, lay := pristine(t)
	segs := segmentFiles(t, src)
	n := len(segs)
	var end wal.LSN // the LSN after the missing segment's entries
	for _, e := range lay {
		if e.seg == segs[n-2] {
			end = e.first + wal.LSN(e.count)
		}
	}
	for _, size := range []int64{harnessOpts.SegmentSize, 0} {
		for _, ro := range []bool{false, true} {
			t.Run(fmt.Sprintf("SegmentSize=%d/ro=%v", size, ro), func(t *testing.T) {
				dir := t.TempDir()
				copyDir(t, src, dir)
				if err := os.Truncate(filepath.Join(dir, filepath.Base(segs[n-1])), 0); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(filepath.Join(dir, filepath.Base(segs[n-2]))); err != nil {
					t.Fatal(err)
				}
				opts := wal.Options{SegmentSize: size, Sync: wal.SyncNever, Salvage: true, ReadOnly: ro}
				l, err := wal.Open(dir, &opts)
				if err != nil {
					if !errors.Is(err, wal.ErrCorrupt) {
						t.Fatalf("Open: %v, want ErrCorrupt or an open past the loss", err)
					}
					return
				}
				defer closeLog(t, l)
				if torn := l.Report().Torn; torn != nil {
					t.Errorf("Report().Torn = %v: a missing segment taken for a torn roll", torn)
				}
				if ro {
					return
				}
				if lsn := appendN(t, l, harnessRecords, 1)[0]; lsn < end {
					t.Errorf("next LSN %d, an LSN the missing segment's entries had (they ended before %d)", lsn, end)
				}
			})
		}
	}
}
