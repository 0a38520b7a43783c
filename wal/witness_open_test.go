package wal_test

import (
	"errors"
	"testing"

	"github.com/walq/walq/wal"
)

// crashImage appends n records of zeroRecord to a SyncNever log in a new
// directory, each written (an entry each) and none fsynced, and returns a
// copy of the directory taken while the log is open: what a process
// crash (kill -9) leaves, its writes in the page cache.
func crashImage(t *testing.T, opts *wal.Options, n int) string {
	t.Helper()
	dir := t.TempDir()
	l := openLog(t, dir, opts)
	for i := range n {
		_, c, err := l.Append(zeroRecord(i))
		if err == nil {
			err = c.WaitWritten()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	img := t.TempDir()
	copyDir(t, dir, img)
	closeLog(t, l)
	return img
}

// reopenIdle opens the log in dir, leaves it idle until a witness is
// written (10 s at most) and closes it.
func reopenIdle(t *testing.T, dir string, opts *wal.Options) {
	t.Helper()
	l := openLog(t, dir, opts)
	if !awaitGrowth(l, logSize(l)) {
		t.Log("no witness after the reopen after 10 s")
	}
	closeLog(t, l)
}

// TestWitnessAfterCrashOpen: after a process crash, Open fsyncs the
// records the crash left, but no entry of theirs says so. Left idle, the
// log writes a witness that names them: a flipped bit in one of them,
// which a valid entry follows in a file that ends in zeros, is refused,
// not cut as a tear.
func TestWitnessAfterCrashOpen(t *testing.T) {
	opts := &wal.Options{Sync: wal.SyncNever}
	dir := crashImage(t, opts, 3)
	if n := witnessCount(t, dir); n != 0 {
		t.Fatalf("%d witnesses in the crash image, want none", n)
	}
	reopenIdle(t, dir, opts)
	refuseFlip(t, dir, 1)
}

// TestWitnessAfterCrashOpenRolled: a process crash right after a roll
// leaves the sealed segment's last records under an empty tail, which
// Open fsyncs; left idle, the log writes a witness into the tail, and a
// flipped bit in the sealed segment's last entry is damage, not a torn
// roll.
func TestWitnessAfterCrashOpenRolled(t *testing.T) {
	opts := &wal.Options{Sync: wal.SyncNever, SegmentSize: 4 << 10}
	dir := crashImage(t, opts, 3) // the third seals the segment
	if n := len(segmentFiles(t, dir)); n != 2 {
		t.Fatalf("%d segments in the crash image, want 2", n)
	}
	reopenIdle(t, dir, opts)
	lay := recordEntries(layoutOf(t, dir))
	e := lay[len(lay)-1]
	fileOp(t, e.seg, func(b []byte) []byte { b[e.off+40] ^= 0x01; return b })
	l, err := wal.Open(dir, opts)
	if err != nil {
		if !errors.Is(err, wal.ErrCorrupt) {
			t.Fatalf("Open = %v, want ErrCorrupt", err)
		}
		return
	}
	torn := l.Report().Torn
	_, verr := l.Verify()
	closeLog(t, l)
	if torn != nil {
		t.Fatalf("Open cut durable records as a torn roll: %v", torn)
	}
	if !errors.Is(verr, wal.ErrCorrupt) {
		t.Fatalf("Verify = %v, want ErrCorrupt", verr)
	}
}
