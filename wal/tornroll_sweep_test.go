package wal_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/walq/walq/wal"
)

// rollState builds seg0 = [E1 frame][E2 frame] (E2 made the roll) and an
// empty tail. e1Size 0 means no E1: E2 is the log's first entry. E2 holds
// n2 records of size2 bytes (one AppendAll: a batch).
func rollState(t *testing.T, dir string, e1Size, n2, size2 int) (seg0 []byte, path string, e1Frame int, e1 wal.LSN, e2 wal.LSN) {
	t.Helper()
	opts := wal.Options{SegmentSize: 4096}
	l := openLog(t, dir, &opts)
	if e1Size > 0 {
		lsn, c, err := l.Append(make([]byte, e1Size))
		if err != nil || c.Wait() != nil {
			t.Fatalf("Append: %v", err)
		}
		e1 = lsn
	}
	recs := make([][]byte, n2)
	for i := range recs {
		recs[i] = make([]byte, size2)
		for j := range recs[i] {
			recs[i][j] = byte(i*7 + j)
		}
	}
	e2, _, err := l.AppendAll(recs, true)
	if err != nil {
		t.Fatal(err)
	}
	closeLog(t, l)
	segs := segmentFiles(t, dir)
	if len(segs) != 2 {
		t.Fatalf("%d segments, want 2", len(segs))
	}
	if err := os.Truncate(segs[1], 0); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	if e1Size > 0 {
		n, k := binary.Uvarint(b)
		e1Frame = k + int(n)
	}
	return b, segs[0], e1Frame, e1, e2
}

// A single bit flip anywhere in E1's frame (synced), with a torn E2 after
// it: a salvage must refuse or resume past E1. Under the race detector
// each tear flips every third bit, the three tears between them every
// bit (test.sh's step plain flips every bit with every tear).
func TestSalvageRotSweepBeforeTornRoll(t *testing.T) {
	stride := 1
	if raceEnabled {
		stride = 3
	}
	for _, e1Size := range []int{20, 200} {
		for ti, torn := range []int{1, 30, 400} {
			dir0 := t.TempDir()
			b0, _, e1Frame, e1, _ := rollState(t, dir0, e1Size, 1, 5000)
			limitBits := e1Frame * 8
			if e1Size == 200 {
				limitBits = 22 * 8 // frame length + header
			}
			for bit := ti % stride; bit < limitBits; bit += stride {
				name := fmt.Sprintf("e1=%d/torn=%d/bit=%d", e1Size, torn, bit)
				dir := t.TempDir()
				_, path, _, _, _ := rollState(t, dir, e1Size, 1, 5000)
				b := append([]byte(nil), b0[:e1Frame+torn]...)
				b[bit/8] ^= 1 << (bit % 8)
				if err := os.WriteFile(path, b, 0o600); err != nil {
					t.Fatal(err)
				}
				l, err := wal.Open(dir, &wal.Options{SegmentSize: 4096, Salvage: true})
				if err != nil {
					if !errors.Is(err, wal.ErrCorrupt) {
						t.Errorf("%s: %v", name, err)
					}
					continue
				}
				if next := appendN(t, l, 1, 1)[0]; next <= e1 {
					t.Errorf("%s: next LSN %d <= synced E1 %d; report %+v", name, next, e1, l.Report())
				}
				closeLog(t, l)
			}
		}
	}
}

// A genuine torn roll: E2 (maybe the log's first, maybe a batch) cut at
// every length; a salvage repairs it as a torn roll. Under the race
// detector the cases of 31-byte steps cut at every third of their lengths,
// the third that the case's index modulo 3 picks (test.sh's step plain
// cuts at all of them).
func TestSalvageTornRollSweep(t *testing.T) {
	for ci, c := range []struct{ e1, n2, size2 int }{{0, 1, 5000}, {20, 1, 5000}, {0, 60, 90}, {20, 60, 90}, {0, 1, 200000}} {
		dir0 := t.TempDir()
		b0, _, e1Frame, _, e2 := rollState(t, dir0, c.e1, c.n2, c.size2)
		step := 31
		if len(b0) > 20000 {
			step = 4999
		}
		first := e1Frame + 1
		if raceEnabled && step < 1000 {
			first += ci % 3 * step
			step *= 3
		}
		for cut := first; cut < len(b0); cut += step {
			name := fmt.Sprintf("%+v/cut=%d", c, cut)
			dir := t.TempDir()
			_, path, _, _, _ := rollState(t, dir, c.e1, c.n2, c.size2)
			if err := os.WriteFile(path, b0[:cut], 0o600); err != nil {
				t.Fatal(err)
			}
			l, err := wal.Open(dir, &wal.Options{SegmentSize: 4096, Salvage: true})
			if err != nil {
				t.Errorf("%s: salvage refused a torn roll: %v", name, err)
				continue
			}
			if next := appendN(t, l, 1, 1)[0]; next < e2 || (c.e1 == 0 && next != e2) {
				t.Errorf("%s: next LSN %d, want %d", name, next, e2)
			}
			closeLog(t, l)
		}
	}
}
