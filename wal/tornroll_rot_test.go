package wal_test

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/walq/walq/wal"
)

// The log's first entry (E1, synced) then a larger one that made the roll
// and was torn by a crash, under the roll's empty tail; one bit of E1's
// frame length rots so that the frame runs past the end of the file, as a
// torn write's would. E1 was acknowledged: a salvage must not take it for
// the torn write and give its LSN out again (refusing is allowed).
func TestSalvageRotBeforeTornRoll(t *testing.T) {
	dir := t.TempDir()
	opts := wal.Options{SegmentSize: 4096}
	l := openLog(t, dir, &opts)
	e1, c, err := l.Append(make([]byte, 100))
	if err != nil || c.Wait() != nil {
		t.Fatalf("Append: %v", err)
	}
	if _, _, err := l.Append(make([]byte, 5000)); err != nil {
		t.Fatal(err)
	}
	closeLog(t, l)
	segs := segmentFiles(t, dir)
	if len(segs) != 2 {
		t.Fatalf("%d segments, want 2", len(segs))
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	n, k := binary.Uvarint(b)
	keep := k + int(n) + 30 // E1 whole, 30 bytes of the torn entry
	b = b[:keep]
	b[0] ^= 0x80 // rot: E1's frame length now runs past the end
	if m, k2 := binary.Uvarint(b); k2 > 0 && m <= uint64(len(b)-k2) {
		t.Fatalf("precondition: rotted length %d fits the file", m)
	}
	if err := os.WriteFile(segs[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(segs[1], 0); err != nil {
		t.Fatal(err)
	}
	sopts := opts
	sopts.Salvage = true
	l, err = wal.Open(dir, &sopts)
	if err != nil {
		if !errors.Is(err, wal.ErrCorrupt) {
			t.Fatalf("salvaging Open: %v", err)
		}
		t.Logf("refused: %v", err)
		return
	}
	defer closeLog(t, l)
	t.Logf("Report = %+v", l.Report())
	if next := appendN(t, l, 1, 1)[0]; next <= e1 {
		t.Errorf("next LSN %d after the salvage: LSN %d was synced and acknowledged, and is given out again", next, e1)
	}
}
