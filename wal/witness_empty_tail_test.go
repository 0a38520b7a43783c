package wal_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walq/walq/wal"
)

// TestWitnessInRolledTail: a group that rolls the segment leaves its
// records at the end of the sealed segment and an empty tail. The roll
// fsyncs the sealed segment, so they are durable, but nothing after them
// says so: without a witness in the new tail, a flipped bit in the last
// of them looks like a roll that a power loss tore, and Open cut it. The
// witness written into the tail once the log is idle names them: the
// flip is damage, reported, and nothing is cut. Undamaged, the log reopens, reads every record and
// appends after them.
func TestWitnessInRolledTail(t *testing.T) {
	dir := t.TempDir()
	opts := &wal.Options{Sync: wal.SyncAlways, SegmentSize: 4 << 10}
	l := openLog(t, dir, opts)
	for i := range 3 { // 3 entries of 1.5 KiB: the third seals the segment
		_, c, err := l.Append(zeroRecord(i))
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := len(l.Segments()); n != 2 {
		t.Fatalf("%d segments after the roll, want 2", n)
	}
	if !awaitGrowth(l, logSize(l)) {
		t.Log("no witness in the tail after 10 s")
	}
	closeLog(t, l)
	whole := t.TempDir()
	copyDir(t, dir, whole)

	lay := recordEntries(layoutOf(t, dir))
	e := lay[len(lay)-1]
	if filepath.Base(e.seg) != "00000000000000000001" {
		t.Fatalf("the last record entry is in %s, want the sealed segment", e.seg)
	}
	fileOp(t, e.seg, func(b []byte) []byte { b[e.off+40] ^= 0x01; return b })
	if l, err := wal.Open(dir, opts); err == nil {
		// A plain Open reads a sealed segment's entries only as far
		// as it needs; Verify reads them all.
		torn := l.Report().Torn
		_, verr := l.Verify()
		closeLog(t, l)
		if torn != nil {
			t.Fatalf("Open cut durable records as a torn roll: %v", torn)
		}
		if !errors.Is(verr, wal.ErrCorrupt) {
			t.Fatalf("Verify = %v, want ErrCorrupt", verr)
		}
	} else if !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("Open = %v, want ErrCorrupt", err)
	}

	l = openLog(t, whole, opts)
	if torn := l.Report().Torn; torn != nil {
		t.Fatalf("undamaged: Report().Torn = %v", torn)
	}
	lsn, c, err := l.Append([]byte("after"))
	if err == nil {
		err = c.Wait()
	}
	if err != nil || lsn != 4 {
		t.Fatalf("Append after the reopen = LSN %d, %v; want 4", lsn, err)
	}
	lsns, _ := readAll(t, l, 1)
	if len(lsns) != 4 || lsns[0] != 1 || lsns[3] != 4 {
		t.Fatalf("read LSNs %v, want 1-4", lsns)
	}
	if _, err := l.Verify(); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	closeLog(t, l)
}

// TestTornRolledWitnessLosesNoLSN: the witness written into the empty
// tail a roll leaves is the tail's first entry, and, not fsynced with its
// write, what a power loss most often tears there. It holds no record, so
// the report of its cut must say no LSN was lost, as for a witness after
// records (TestTornWitnessLosesNoLSN): a queue lists the LSNs a repair
// lost as messages that may be gone. Its version byte must have
// survived: before it, nothing in the segment tells a witness from a
// version-1 entry of one small record.
func TestTornRolledWitnessLosesNoLSN(t *testing.T) {
	for _, keep := range []int64{6, 10, 18, 25} { // of the witness's 26 bytes: 1 of frame length, then the entry
		t.Run(fmt.Sprintf("%d bytes kept", keep), func(t *testing.T) {
			dir := t.TempDir()
			opts := &wal.Options{Sync: wal.SyncAlways, SegmentSize: 4 << 10}
			l := openLog(t, dir, opts)
			for i := range 3 { // the third seals the segment
				_, c, err := l.Append(zeroRecord(i))
				if err == nil {
					err = c.Wait()
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if !awaitGrowth(l, logSize(l)) {
				t.Fatal("no witness in the tail after 10 s")
			}
			closeLog(t, l)
			segs := segmentFiles(t, dir)
			if lay := layoutOf(t, dir); len(segs) != 2 || lay[len(lay)-1].count != 0 || lay[len(lay)-1].off != 0 {
				t.Fatalf("the tail does not hold a witness alone: %d segments, %+v", len(segs), lay[len(lay)-1])
			}
			fileOp(t, segs[1], func(b []byte) []byte { return b[:keep] })
			for _, ro := range []bool{true, false} {
				l = openLog(t, dir, &wal.Options{SegmentSize: 4 << 10, ReadOnly: ro})
				torn := l.Report().Torn
				if torn == nil || torn.LastLSN+1 != torn.FirstLSN || !strings.Contains(torn.String(), "no LSN") {
					closeLog(t, l)
					t.Fatalf("read-only %v: Torn = %v, want a cut that lost no LSN", ro, torn)
				}
				if ro {
					rep, err := l.Verify()
					if vt := rep.Torn; err != nil || vt == nil || vt.LastLSN+1 != vt.FirstLSN {
						closeLog(t, l)
						t.Fatalf("Verify = %v, Torn %v; want a cut that lost no LSN", err, vt)
					}
				} else {
					if lsn, _, err := l.Append([]byte("next")); err != nil || lsn != 4 {
						t.Fatalf("Append = %d, %v; want LSN 4", lsn, err)
					}
				}
				closeLog(t, l)
			}
		})
	}
}
