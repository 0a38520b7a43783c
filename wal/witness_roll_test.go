package wal_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/walq/walq/wal"
)

// TestSalvageRotBeforeWitnessAndTornRoll: E1, synced and named by a
// witness, then a batch that rolls the segment; a power loss cuts the
// sealed segment after E1's frame (the witness and the batch never
// reached the disk) and a bit of E1 rots. The tail's name counts three
// entries where the bytes left hold two at most, as a torn roll leaves
// it, but nothing tells E1's LSN: a salvage must refuse, or resume past
// E1, never give out E1's LSN again.
func TestSalvageRotBeforeWitnessAndTornRoll(t *testing.T) {
	build := func(dir string) (b []byte, path string, e1Frame int) {
		for try := 0; ; try++ { // the idle witness timer may name the roll in the new tail: build again
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			b, path, e1Frame = buildOnce(t, dir)
			if path != "" || try == 20 {
				break
			}
		}
		if path == "" {
			t.Fatalf("20 builds of the log wrote a witness in the tail the roll left")
		}
		return b, path, e1Frame
	}
	b0, _, e1Frame := build(t.TempDir())
	for bit := range e1Frame * 8 {
		name := fmt.Sprintf("bit %d", bit)
		dir := t.TempDir()
		_, path, _ := build(dir)
		b := append([]byte(nil), b0[:e1Frame+1]...)
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
		if next := appendN(t, l, 1, 1)[0]; next <= 1 {
			t.Errorf("%s: next LSN %d: the synced E1's LSN given out again; report %+v", name, next, l.Report())
		}
		closeLog(t, l)
	}
}

// buildOnce writes the log TestSalvageRotBeforeWitnessAndTornRoll damages
// in dir: E1, its witness, and a batch that rolls the segment, the tail
// then cut to nothing. It returns the first segment's bytes, its path
// and E1's frame size, or "" for the path when a witness was written in
// the tail the roll left.
func buildOnce(t *testing.T, dir string) (b []byte, path string, e1Frame int) {
	t.Helper()
	l := openLog(t, dir, &wal.Options{SegmentSize: 4096})
	_, c, err := l.Append(make([]byte, 20))
	if err == nil {
		err = c.Wait()
	}
	if err == nil {
		err = l.Flush() // the witness of E1
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.AppendAll([][]byte{make([]byte, 5000)}, true); err != nil {
		t.Fatal(err)
	}
	closeLog(t, l)
	segs := segmentFiles(t, dir)
	if len(segs) != 2 {
		t.Fatalf("%d segments, want 2", len(segs))
	}
	if n := witnessCount(t, dir); n != 1 {
		return nil, "", 0
	}
	if err := os.Truncate(segs[1], 0); err != nil {
		t.Fatal(err)
	}
	b, err = os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	n, k := binary.Uvarint(b)
	return b, segs[0], k + int(n)
}
