package wal

import (
	"bytes"
	"os"
	"testing"
)

// TestRollCutsZerosPastSealedEnd: the zeros ahead of the tail stop at
// SegmentSize (extendTarget), so a roll never finds the sealed file longer
// than its last entry; should it (zeros written past that end), the roll
// cuts them before it fsyncs the sealed segment (openRolled), instead of
// taking the longer file for a mispredicted roll that poisons the log, or
// leaving zeros inside a sealed segment, which Open refuses. The zeros are
// written here by hand, past SegmentSize, after the extender's own.
func TestRollCutsZerosPastSealedEnd(t *testing.T) {
	const segSize = 16 << 10
	dir := t.TempDir()
	opts := &Options{Sync: SyncAlways, SegmentSize: segSize}
	l, err := open(dir, opts, faults{})
	if err != nil {
		t.Fatal(err)
	}
	rec := bytes.Repeat([]byte("r"), 1000)
	appendRec := func() {
		t.Helper()
		_, c, err := l.Append(rec)
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	appendRec()
	c := l.c
	c.mu.Lock()
	x := &c.ext
	if x.f == nil || x.end != segSize {
		c.mu.Unlock()
		t.Fatalf("the tail's zeros end at %d, want %d", x.end, segSize)
	}
	if _, err := x.f.WriteAt(make([]byte, 8<<10), x.end); err != nil {
		c.mu.Unlock()
		t.Fatal(err)
	}
	x.end += 8 << 10
	c.mu.Unlock()

	for len(l.Segments()) < 2 {
		appendRec()
	}
	sealed := l.Segments()[0]
	fi, err := os.Stat(sealed.Path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != sealed.Bytes {
		t.Fatalf("sealed %s holds %d bytes, its entries %d", sealed.Path, fi.Size(), sealed.Bytes)
	}
	lsn := l.WrittenLSN()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = open(dir, opts, faults{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Verify(); err != nil {
		t.Fatal(err)
	}
	for i := LSN(1); i <= lsn; i++ {
		if got, err := l.Read(i); err != nil || !bytes.Equal(got, rec) {
			t.Fatalf("Read(%d) after reopen: %v", i, err)
		}
	}
}
