package wal_test

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walq/walq/internal/seglayout"
	"github.com/walq/walq/wal"
)

// entryPos is where one entry lies on disk, found by parsing the files
// independently of the package.
type entryPos struct {
	seg   string // segment file
	off   int64  // frame offset
	size  int64  // frame size (uvarint + entry)
	hdr   int64  // uvarint length
	first wal.LSN
	count int
}

// layoutOf parses every segment of dir with the documented format.
func layoutOf(t testing.TB, dir string) []entryPos {
	t.Helper()
	es, err := seglayout.Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]entryPos, len(es))
	for i, e := range es {
		out[i] = entryPos{seg: e.Seg, off: e.Off, size: e.Size, hdr: e.Hdr, first: e.First, count: e.Count}
	}
	return out
}

// segmentFiles lists the segment files of dir in order.
func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	segs, err := seglayout.Segments(dir)
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

// copyDir copies a flat directory.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	des, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(src, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, de.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// harnessOpts: small segments, one record per entry (every Append waits).
var harnessOpts = wal.Options{SegmentSize: 4 << 10, Sync: wal.SyncNever}

const harnessRecords = 300

// pristine builds a log of harnessRecords records, one per entry, over
// several segments, and returns its directory and layout.
func pristine(t testing.TB) (string, []entryPos) {
	t.Helper()
	dir := t.TempDir()
	opts := harnessOpts
	l := openLog(t, dir, &opts)
	for i := 0; i < harnessRecords; i++ {
		appendN(t, l, i, 1)
	}
	closeLog(t, l)
	lay := layoutOf(t, dir)
	if len(lay) != harnessRecords || len(segmentFiles(t, dir)) < 4 {
		t.Fatalf("pristine log: %d entries in %d segments", len(lay), len(segmentFiles(t, dir)))
	}
	return dir, lay
}

// fileOp changes a file in place.
func fileOp(t testing.TB, path string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

// lastSegEntries returns the entries of the last segment.
func lastSegEntries(lay []entryPos) []entryPos {
	last := lay[len(lay)-1].seg
	i := len(lay)
	for i > 0 && lay[i-1].seg == last {
		i--
	}
	return lay[i:]
}

// middleSealed returns an entry in the middle of the second segment.
func middleSealed(lay []entryPos) entryPos {
	second := lay[0].seg
	var in []entryPos
	for _, e := range lay {
		if e.seg != lay[0].seg && (second == lay[0].seg || e.seg == second) {
			second = e.seg
			in = append(in, e)
		}
	}
	return in[len(in)/2]
}

// outcome checks what Open and reads make of a damaged copy.
type outcome func(t *testing.T, dir string, lay []entryPos, damaged entryPos)

// corruptionCase is one damage applied to a copy of the pristine log.
type corruptionCase struct {
	name    string
	damage  func(t *testing.T, lay []entryPos) entryPos // damages the files, returns the entry hit
	outcome outcome
}

func TestCorruptionHarness(t *testing.T) {
	src, lay := pristine(t)
	last := lay[len(lay)-1]
	tail := lastSegEntries(lay)
	cases := []corruptionCase{
		{"tail: last 512-byte sector zeroed", func(t *testing.T, lay []entryPos) entryPos {
			fileOp(t, last.seg, func(b []byte) []byte { clear(b[len(b)-512:]); return b })
			return entryAtOrAfter(tail, last.off+last.size-512)
		}, tornKeepsPrefix},
		{"tail: 4096 zero bytes appended", func(t *testing.T, lay []entryPos) entryPos {
			fileOp(t, last.seg, func(b []byte) []byte { return append(b, make([]byte, 4096)...) })
			return entryPos{seg: last.seg, off: last.off + last.size, first: last.first + 1}
		}, zerosCleanEnd},
		{"last sealed: 4096 zero bytes appended", func(t *testing.T, lay []entryPos) entryPos {
			e := lay[len(lay)-len(tail)-1]
			fileOp(t, e.seg, func(b []byte) []byte { return append(b, make([]byte, 4096)...) })
			return entryPos{seg: e.seg, off: e.off + e.size, first: e.first + wal.LSN(e.count)}
		}, zerosCleanEnd},
		{"tail: garbage appended", func(t *testing.T, lay []entryPos) entryPos {
			rng := rand.New(rand.NewPCG(1, 2))
			fileOp(t, last.seg, func(b []byte) []byte {
				for range 1000 {
					b = append(b, byte(rng.Uint32()))
				}
				return b
			})
			return entryPos{seg: last.seg, off: last.off + last.size, first: last.first + 1}
		}, tornKeepsPrefix},
		{"tail: bit flip with valid entries after it fails Open", func(t *testing.T, lay []entryPos) entryPos {
			e := tail[len(tail)/2]
			flipBit(t, e.seg, e.off+e.size-1)
			return e
		}, corruptOnOpen},
		{"tail: length prefix zeroed mid-segment fails Open", func(t *testing.T, lay []entryPos) entryPos {
			e := tail[len(tail)/2]
			fileOp(t, e.seg, func(b []byte) []byte { b[e.off] = 0; return b })
			return e
		}, corruptOnOpen},
		{"sealed: version byte flipped in first entry fails Open", func(t *testing.T, lay []entryPos) entryPos {
			e := firstOf(lay, middleSealed(lay).seg)
			flipBit(t, e.seg, e.off+e.hdr+4)
			return e
		}, corruptOnOpen},
		{"sealed: payload bit flip fails Read and Reader", func(t *testing.T, lay []entryPos) entryPos {
			e := middleSealed(lay)
			flipBit(t, e.seg, e.off+e.size-1)
			return e
		}, corruptOnRead},
		{"sealed: CRC byte flipped fails Read and Reader", func(t *testing.T, lay []entryPos) entryPos {
			e := middleSealed(lay)
			flipBit(t, e.seg, e.off+e.hdr)
			return e
		}, corruptOnRead},
		{"sealed: last 10 bytes cut fails Open", func(t *testing.T, lay []entryPos) entryPos {
			seg := middleSealed(lay).seg
			e := lastOf(lay, seg)
			fileOp(t, seg, func(b []byte) []byte { return b[:len(b)-10] })
			return e
		}, corruptOnOpen},
		{"sealed: whole entry removed fails Read and Reader", func(t *testing.T, lay []entryPos) entryPos {
			e := middleSealed(lay)
			fileOp(t, e.seg, func(b []byte) []byte { return append(b[:e.off:e.off], b[e.off+e.size:]...) })
			return e
		}, corruptOnRead},
		{"sealed: segment file missing fails Open", func(t *testing.T, lay []entryPos) entryPos {
			e := firstOf(lay, middleSealed(lay).seg)
			if err := os.Remove(e.seg); err != nil {
				t.Fatal(err)
			}
			return e
		}, corruptOnOpen},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, src, dir)
			lay := layoutOf(t, src)
			for i := range lay { // the copy's paths
				lay[i].seg = filepath.Join(dir, filepath.Base(lay[i].seg))
			}
			last, tail = lay[len(lay)-1], lastSegEntries(lay)
			damaged := tc.damage(t, lay)
			tc.outcome(t, dir, lay, damaged)
		})
	}
}

func flipBit(t testing.TB, path string, off int64) {
	t.Helper()
	fileOp(t, path, func(b []byte) []byte { b[off] ^= 0x10; return b })
}

func entryAtOrAfter(es []entryPos, off int64) entryPos {
	for _, e := range es {
		if e.off+e.size > off {
			return e
		}
	}
	return es[len(es)-1]
}

func firstOf(lay []entryPos, seg string) entryPos {
	for _, e := range lay {
		if e.seg == seg {
			return e
		}
	}
	panic("no entry in " + seg)
}

func lastOf(lay []entryPos, seg string) entryPos {
	var out entryPos
	for _, e := range lay {
		if e.seg == seg {
			out = e
		}
	}
	return out
}

// tornKeepsPrefix: Open cuts the tail at the damaged entry, keeps every
// entry before it, reports the cut, and the log takes new records.
func tornKeepsPrefix(t *testing.T, dir string, lay []entryPos, damaged entryPos) {
	t.Helper()
	keep := int(damaged.first - 1)
	before, err := os.Stat(damaged.seg)
	if err != nil {
		t.Fatal(err)
	}
	opts := harnessOpts
	l := openLog(t, dir, &opts)
	rep := l.Report()
	if rep.Torn == nil || rep.Torn.Offset != damaged.off || rep.Torn.Bytes != before.Size()-damaged.off || rep.Torn.Segment != damaged.seg {
		t.Fatalf("Report().Torn = %+v, want a cut of %d bytes at %s offset %d", rep.Torn, before.Size()-damaged.off, damaged.seg, damaged.off)
	}
	if l.WrittenLSN() != wal.LSN(keep) {
		t.Fatalf("WrittenLSN %d after repair, want %d", l.WrittenLSN(), keep)
	}
	checkRecords(t, l, 1, 0, keep)
	appendN(t, l, keep, 10)
	closeLog(t, l)
	l = openLog(t, dir, &opts)
	defer closeLog(t, l)
	if rep := l.Report(); rep.Torn != nil {
		t.Fatalf("second Open reports a torn tail again: %+v", rep.Torn)
	}
	checkRecords(t, l, 1, 0, keep+10)
}

// zerosCleanEnd: the zeros after the last entry of the segment damaged
// names (zeros written ahead of the tail) are a clean end: Open reports no
// cut, keeps every record and cuts the zeros, and the log takes new
// records.
func zerosCleanEnd(t *testing.T, dir string, lay []entryPos, damaged entryPos) {
	t.Helper()
	all := int(lay[len(lay)-1].first) + lay[len(lay)-1].count - 1
	opts := harnessOpts
	l := openLog(t, dir, &opts)
	if rep := l.Report(); rep.Torn != nil || len(rep.Salvaged) > 0 {
		t.Fatalf("Open reports damage: Torn %+v, Salvaged %+v", rep.Torn, rep.Salvaged)
	}
	if l.WrittenLSN() != wal.LSN(all) {
		t.Fatalf("WrittenLSN %d after Open, want %d", l.WrittenLSN(), all)
	}
	if fi, err := os.Stat(damaged.seg); err != nil || fi.Size() != damaged.off {
		t.Fatalf("%s after Open: %v, %v; want %d bytes, the zeros cut", damaged.seg, fi.Size(), err, damaged.off)
	}
	checkRecords(t, l, 1, 0, all)
	if _, err := l.Verify(); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	appendN(t, l, all, 10)
	closeLog(t, l)
	l = openLog(t, dir, &opts)
	defer closeLog(t, l)
	if rep := l.Report(); rep.Torn != nil {
		t.Fatalf("second Open reports a torn tail: %+v", rep.Torn)
	}
	checkRecords(t, l, 1, 0, all+10)
}

// corruptOnOpen: Open fails with ErrCorrupt naming the segment and the
// offset, and leaves the files alone.
func corruptOnOpen(t *testing.T, dir string, lay []entryPos, damaged entryPos) {
	t.Helper()
	before := dirSnapshot(t, dir)
	opts := harnessOpts
	_, err := wal.Open(dir, &opts)
	checkCorruptErr(t, "Open", err, damaged)
	if after := dirSnapshot(t, dir); after != before {
		t.Fatalf("failed Open changed the directory:\n%s\n%s", before, after)
	}
}

// corruptOnRead: Open succeeds (sealed segments are verified lazily), and
// Read and View of a record in the damaged segment and a Reader crossing it
// fail with ErrCorrupt naming the segment and the offset; Verify finds it.
func corruptOnRead(t *testing.T, dir string, lay []entryPos, damaged entryPos) {
	t.Helper()
	opts := harnessOpts
	l := openLog(t, dir, &opts)
	defer closeLog(t, l)
	_, err := l.Read(damaged.first)
	checkCorruptErr(t, "Read", err, damaged)
	err = l.View(damaged.first, func([]byte) error { t.Fatal("View called fn with a damaged record"); return nil })
	checkCorruptErr(t, "View", err, damaged)
	r := l.NewReader(1)
	defer r.Close()
	for err = nil; err == nil; _, _, err = r.Next() {
	}
	checkCorruptErr(t, "Reader.Next", err, damaged)
	rep, err := l.Verify()
	if !errors.Is(err, wal.ErrCorrupt) || len(rep.Salvaged) == 0 {
		t.Fatalf("Verify = %+v, %v; want ErrCorrupt with damage listed", rep, err)
	}
}

func checkCorruptErr(t *testing.T, op string, err error, damaged entryPos) {
	t.Helper()
	if !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("%s: %v, want ErrCorrupt", op, err)
	}
	if !strings.Contains(err.Error(), filepath.Base(damaged.seg)) && !strings.Contains(err.Error(), filepath.Dir(damaged.seg)) {
		t.Fatalf("%s: %q does not name the segment %s", op, err, damaged.seg)
	}
	if !strings.Contains(err.Error(), "offset") {
		t.Fatalf("%s: %q does not give the offset", op, err)
	}
	t.Logf("%s: %v", op, err)
}

// TestTornTailAtEveryOffset cuts the last entry at every byte and checks
// that Open keeps exactly the whole entries before it.
func TestTornTailAtEveryOffset(t *testing.T) {
	src, lay := pristine(t)
	last := lay[len(lay)-1]
	for cut := int64(1); cut < last.size; cut++ {
		dir := t.TempDir()
		copyDir(t, src, dir)
		seg := filepath.Join(dir, filepath.Base(last.seg))
		if err := os.Truncate(seg, last.off+cut); err != nil {
			t.Fatal(err)
		}
		opts := harnessOpts
		l := openLog(t, dir, &opts)
		rep := l.Report()
		if rep.Torn == nil || rep.Torn.Offset != last.off || rep.Torn.Bytes != cut {
			t.Fatalf("cut %d: Torn = %+v, want %d bytes at offset %d", cut, rep.Torn, cut, last.off)
		}
		checkTornLSNs(t, cut, last, rep.Torn)
		if l.WrittenLSN() != last.first-1 {
			t.Fatalf("cut %d: WrittenLSN %d, want %d", cut, l.WrittenLSN(), last.first-1)
		}
		appendN(t, l, int(last.first-1), 10)
		closeLog(t, l)
		l = openLog(t, dir, &opts)
		checkRecords(t, l, 1, 0, int(last.first-1)+10)
		closeLog(t, l)
	}
}

// checkTornLSNs: the cut entry is counted once its length prefix survives,
// and its LSNs are known once its header survives.
func checkTornLSNs(t *testing.T, cut int64, last entryPos, d *wal.Damage) {
	t.Helper()
	wantEntries, wantFirst, wantLast := 0, wal.LSN(0), wal.LSN(0)
	if cut >= last.hdr {
		wantEntries, wantFirst = 1, last.first
	}
	if cut >= last.hdr+25 { // the whole header of a version-2 entry
		wantLast = last.first
	}
	if d.Entries != wantEntries || d.FirstLSN != wantFirst || d.LastLSN != wantLast {
		t.Fatalf("cut %d: Torn entries %d LSNs %d-%d, want %d entries LSNs %d-%d",
			cut, d.Entries, d.FirstLSN, d.LastLSN, wantEntries, wantFirst, wantLast)
	}
}

// TestSalvage flips a bit in a sealed entry and opens with Salvage: the
// entry's records are skipped and reported, everything else is readable.
func TestSalvage(t *testing.T) {
	for _, tc := range []struct {
		name string
		pick func(lay []entryPos) entryPos
	}{
		{"middle of a sealed segment", middleSealed},
		{"first entry of a sealed segment", func(lay []entryPos) entryPos { return firstOf(lay, middleSealed(lay).seg) }},
		{"last entry of a sealed segment", func(lay []entryPos) entryPos { return lastOf(lay, middleSealed(lay).seg) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, lay := pristine(t)
			dir := t.TempDir()
			copyDir(t, src, dir)
			e := tc.pick(lay)
			seg := filepath.Join(dir, filepath.Base(e.seg))
			flipBit(t, seg, e.off+e.size-1)
			opts := harnessOpts
			opts.Salvage = true
			l := openLog(t, dir, &opts)
			defer closeLog(t, l)
			rep := l.Report()
			if len(rep.Salvaged) != 1 {
				t.Fatalf("Salvaged = %+v, want one region", rep.Salvaged)
			}
			d := rep.Salvaged[0]
			if d.Segment != seg || d.Offset != e.off || d.Bytes != e.size || d.Entries != 1 ||
				d.FirstLSN != e.first || d.LastLSN != e.first+wal.LSN(e.count)-1 {
				t.Fatalf("Salvaged[0] = %+v, want %s offset %d, %d bytes, 1 entry, LSNs %d-%d",
					d, seg, e.off, e.size, e.first, e.first+wal.LSN(e.count)-1)
			}
			lsns, _ := readAll(t, l, 1)
			if len(lsns) != harnessRecords-e.count {
				t.Fatalf("reader returned %d records, want %d", len(lsns), harnessRecords-e.count)
			}
			for _, lsn := range lsns {
				if lsn == e.first {
					t.Fatalf("reader returned the lost LSN %d", lsn)
				}
			}
			if _, err := l.Read(e.first); !errors.Is(err, wal.ErrNotFound) {
				t.Fatalf("Read(lost %d) = %v, want ErrNotFound", e.first, err)
			}
			for _, lsn := range []wal.LSN{e.first - 1, e.first + 1} {
				if got, err := l.Read(lsn); err != nil || string(got) != string(record(int(lsn-1))) {
					t.Fatalf("Read(%d) = %q, %v", lsn, got, err)
				}
			}
		})
	}
}

// TestNoPanicOnGarbage overwrites random bytes of random segments and
// checks that Open, reads and Verify return errors rather than panic.
func TestNoPanicOnGarbage(t *testing.T) {
	src, _ := pristine(t)
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := 0; i < 40; i++ {
		dir := t.TempDir()
		copyDir(t, src, dir)
		segs := segmentFiles(t, dir)
		for range 1 + rng.IntN(4) {
			seg := segs[rng.IntN(len(segs))]
			fileOp(t, seg, func(b []byte) []byte {
				if len(b) == 0 {
					return b
				}
				off := rng.IntN(len(b))
				for j := off; j < min(len(b), off+1+rng.IntN(64)); j++ {
					b[j] = byte(rng.Uint32())
				}
				return b
			})
		}
		for _, salvage := range []bool{false, true} {
			opts := harnessOpts
			opts.Salvage, opts.ReadOnly = salvage, true
			l, err := wal.Open(dir, &opts)
			if err != nil {
				continue
			}
			r := l.NewReader(l.FirstLSN())
			for j := 0; j < 2*harnessRecords; j++ {
				if _, _, err := r.Next(); err != nil {
					if err != io.EOF && !errors.Is(err, wal.ErrCorrupt) && !errors.Is(err, wal.ErrNotFound) {
						t.Fatalf("Next: unexpected error %v", err)
					}
					break
				}
			}
			r.Close()
			for lsn := l.FirstLSN(); lsn <= l.WrittenLSN(); lsn += 7 {
				_, _ = l.Read(lsn)
			}
			_, _ = l.Verify()
			closeLog(t, l)
		}
	}
}

// TestTailSalvageCut: under Salvage, damage in the last segment with valid
// entries after it is cut there, and the LSNs dropped are reported. When
// the damaged entry is the segment's first, the range starts at its own
// LSN (it once started at the next valid entry: the damaged entry's LSNs
// were missing from the report).
func TestTailSalvageCut(t *testing.T) {
	for _, tc := range []struct {
		name string
		pick func(tail []entryPos) entryPos
	}{
		{"middle entry", func(tail []entryPos) entryPos { return tail[len(tail)/2] }},
		{"first entry", func(tail []entryPos) entryPos { return tail[0] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, lay := pristine(t)
			dir := t.TempDir()
			copyDir(t, src, dir)
			e := tc.pick(lastSegEntries(lay))
			seg := filepath.Join(dir, filepath.Base(e.seg))
			flipBit(t, seg, e.off+e.size-1)
			opts := harnessOpts
			opts.Salvage = true
			l := openLog(t, dir, &opts)
			closed := false
			defer func() {
				if !closed {
					closeLog(t, l)
				}
			}()
			rep := l.Report()
			last := lay[len(lay)-1]
			if rep.Torn != nil || len(rep.Salvaged) != 1 {
				t.Fatalf("Report = %+v", rep)
			}
			if d := rep.Salvaged[0]; d.Offset != e.off || d.FirstLSN != e.first || d.LastLSN != last.first || d.Segment != seg {
				t.Fatalf("Salvaged[0] = %+v, want offset %d LSNs %d-%d", d, e.off, e.first, last.first)
			}
			checkRecords(t, l, 1, 0, int(e.first-1))
			closed = true
			closeLog(t, l)
			// The log, idle after the Open, may have written a witness
			// after the cut (witness.go); no record entry is left past it.
			if fi, err := os.Stat(seg); err != nil || fi.Size() < e.off {
				t.Fatalf("tail cut before %d: %v %v", e.off, fi.Size(), err)
			}
			for _, x := range layoutOf(t, dir) {
				if x.seg == seg && x.off >= e.off && x.count > 0 {
					t.Fatalf("tail not cut at %d: a record entry at %d", e.off, x.off)
				}
			}
		})
	}
}

// TestReadOnlyTornTail: a read-only Log reports a torn tail without
// cutting it, reads the whole entries before it, and Verify agrees.
func TestReadOnlyTornTail(t *testing.T) {
	src, lay := pristine(t)
	dir := t.TempDir()
	copyDir(t, src, dir)
	last := lay[len(lay)-1]
	seg := filepath.Join(dir, filepath.Base(last.seg))
	if err := os.Truncate(seg, last.off+last.size-3); err != nil {
		t.Fatal(err)
	}
	before := dirSnapshot(t, dir)
	opts := harnessOpts
	opts.ReadOnly = true
	l := openLog(t, dir, &opts)
	rep := l.Report()
	if rep.Torn == nil || rep.Torn.Offset != last.off || rep.Torn.Bytes != last.size-3 {
		t.Fatalf("Torn = %+v", rep.Torn)
	}
	checkRecords(t, l, 1, 0, harnessRecords-1)
	vrep, err := l.Verify()
	if err != nil || vrep.Torn == nil || *vrep.Torn != *rep.Torn || len(vrep.Salvaged) != 0 {
		t.Fatalf("Verify = %+v (torn %+v), %v; want the same torn tail", vrep, vrep.Torn, err)
	}
	closeLog(t, l)
	if after := dirSnapshot(t, dir); after != before {
		t.Fatal("read-only Open changed the directory")
	}
}

// TestVerifyReadOnlySalvage: a damaged sealed segment is listed by Verify
// on a read-only, salvaging Log (how a verify tool inspects a broken log).
func TestVerifyReadOnlySalvage(t *testing.T) {
	src, lay := pristine(t)
	dir := t.TempDir()
	copyDir(t, src, dir)
	e := middleSealed(lay)
	flipBit(t, filepath.Join(dir, filepath.Base(e.seg)), e.off+e.size-1)
	l := openLog(t, dir, &wal.Options{ReadOnly: true, Salvage: true})
	defer closeLog(t, l)
	rep, err := l.Verify()
	if !errors.Is(err, wal.ErrCorrupt) || len(rep.Salvaged) != 1 || rep.Salvaged[0].FirstLSN != e.first || rep.Salvaged[0].LastLSN != e.first {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
}

// TestEmptyTailSegment: a crash right after a roll leaves an empty last
// segment; Open learns the next LSN from the segment before it.
func TestEmptyTailSegment(t *testing.T) {
	src, lay := pristine(t)
	dir := t.TempDir()
	copyDir(t, src, dir)
	segs := segmentFiles(t, dir)
	lastIndex := uint64(len(lay)) // one entry per record, indexes from 1
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d", lastIndex+1)), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	opts := harnessOpts
	opts.StartLSN = 7 // ignored: the log holds records
	l := openLog(t, dir, &opts)
	if n := len(l.Segments()); n != len(segs)+1 || l.WrittenLSN() != harnessRecords {
		t.Fatalf("%d segments, WrittenLSN %d", n, l.WrittenLSN())
	}
	appendN(t, l, harnessRecords, 5)
	closeLog(t, l)
	l = openLog(t, dir, &opts)
	defer closeLog(t, l)
	checkRecords(t, l, 1, 0, harnessRecords+5)
}

// TestOnlySegmentTornToNothing: after truncation left one segment, a tear
// that empties it leaves a log with no records; StartLSN then says where
// numbering resumes.
func TestOnlySegmentTornToNothing(t *testing.T) {
	dir := t.TempDir()
	opts := &wal.Options{SegmentSize: 4 << 10, MaxGroupBytes: 512}
	l := openLog(t, dir, opts)
	appendN(t, l, 0, 300)
	if err := l.TruncateFront(1 << 40); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	closeLog(t, l)
	switch {
	case len(segs) == 2 && segs[1].Bytes == 0: // an empty tail after a roll: drop it
		if err := os.Remove(segs[1].Path); err != nil {
			t.Fatal(err)
		}
	case len(segs) != 1:
		t.Fatalf("segments after truncation: %+v", segs)
	}
	if err := os.Truncate(segs[0].Path, 0); err != nil {
		t.Fatal(err)
	}
	opts.StartLSN = 301
	l = openLog(t, dir, opts)
	defer closeLog(t, l)
	if l.FirstLSN() != 301 || l.WrittenLSN() != 300 {
		t.Fatalf("First/Written %d/%d, want 301/300", l.FirstLSN(), l.WrittenLSN())
	}
	if lsn := appendN(t, l, 300, 1)[0]; lsn != 301 {
		t.Fatalf("next LSN %d, want 301", lsn)
	}
}
