package wal_test

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/wal"
)

// zeroRecord is record i of the witness tests: 1500 bytes, all zeros but
// the first, so that damage to it holds an aligned sector of zeros, the
// shape of a tear over zeros ahead of the tail.
func zeroRecord(i int) []byte {
	rec := make([]byte, 1500)
	rec[0] = byte('a' + i)
	return rec
}

// logSize returns the bytes the log's segments hold, whole entries only.
func logSize(l *wal.Log) int64 {
	var n int64
	for _, s := range l.Segments() {
		n += s.Bytes
	}
	return n
}

// awaitGrowth waits until the log holds more than n bytes, up to 10
// seconds, and reports whether it did.
func awaitGrowth(l *wal.Log, n int64) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if logSize(l) > n {
			return true
		}
	}
	return false
}

// firstFrameEnd returns where the first entry of the log in dir ends,
// reading only that entry's frame, which must be written whole: a write
// after it may be in progress.
func firstFrameEnd(t *testing.T, dir string) int64 {
	t.Helper()
	b, err := os.ReadFile(segmentFiles(t, dir)[0])
	if err != nil {
		t.Fatal(err)
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || k+int(n) > len(b) {
		t.Fatalf("no whole entry at the start of the log in %s", dir)
	}
	return int64(k) + int64(n)
}

// witnessCount returns how many witnesses (entries of no record) the
// log's files hold.
func witnessCount(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	for _, e := range layoutOf(t, dir) {
		if e.count == 0 {
			n++
		}
	}
	return n
}

// refuseFlip flips a bit in the payload of the record entry i of the
// closed log in dir, appends zeros as the extender leaves an open log,
// and checks that Open refuses the damage rather than cut durable records.
func refuseFlip(t *testing.T, dir string, i int) {
	t.Helper()
	lay := recordEntries(layoutOf(t, dir))
	e := lay[i]
	fileOp(t, e.seg, func(b []byte) []byte { b[e.off+40] ^= 0x01; return b })
	zerosAhead(t, e.seg, 4096)
	l, err := wal.Open(dir, nil)
	if err == nil {
		torn := l.Report().Torn
		closeLog(t, l)
		t.Fatalf("Open cut durable records as a tear: %v", torn)
	}
	if !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("Open = %v, want ErrCorrupt", err)
	}
}

// TestWitnessIntervalIdle: under SyncInterval, records written at once
// and fsynced by the interval's tick, with nothing written after it, are
// named durable by no entry of theirs. The witness written after the tick
// names them: a flipped bit in one of them, in a file that ends in zeros,
// is refused, not cut as a tear.
func TestWitnessIntervalIdle(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{Sync: wal.SyncInterval, SyncInterval: 200 * time.Millisecond})
	for i := range 3 {
		_, c, err := l.Append(zeroRecord(i))
		if err == nil {
			err = c.Wait() // written; fsynced by a tick
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); l.DurableLSN() < 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if l.DurableLSN() < 3 {
		t.Fatalf("DurableLSN = %d after 10 s, want 3", l.DurableLSN())
	}
	closeLog(t, l) // after the tick's witness: the committer writes it with the fsync
	t.Logf("%d witnesses", witnessCount(t, dir))
	refuseFlip(t, dir, 1)
}

// TestWitnessAlwaysIdle: under SyncAlways each record below is fsynced
// before its Wait returns, but the last one is named durable by no entry
// (none follows it). Once the log stayed idle a while, a witness names it:
// a flipped bit in it is refused, not cut as a torn tail.
func TestWitnessAlwaysIdle(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{Sync: wal.SyncAlways})
	for i := range 3 {
		_, c, err := l.Append(zeroRecord(i))
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !awaitGrowth(l, logSize(l)) {
		t.Log("no witness after 10 s")
	}
	closeLog(t, l)
	refuseFlip(t, dir, 2)
}

// TestCloseWritesNoWitness: Close fsyncs and writes no witness; a closed
// log ends at its last entry, which the shape of a tear excludes, so a
// flipped bit in its records of zeros, which a valid entry follows, is
// refused without one.
func TestCloseWritesNoWitness(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{Sync: wal.SyncNever})
	for i := range 3 {
		_, c, err := l.Append(zeroRecord(i))
		if err == nil {
			err = c.Wait() // written: an entry each
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
	if n := witnessCount(t, dir); n != 0 {
		t.Fatalf("%d witnesses after Close, want none", n)
	}
	lay := recordEntries(layoutOf(t, dir))
	e := lay[1]
	fileOp(t, e.seg, func(b []byte) []byte { b[e.off+40] ^= 0x01; return b })
	l, err := wal.Open(dir, nil)
	if err == nil {
		torn := l.Report().Torn
		closeLog(t, l)
		t.Fatalf("Open cut a closed log's durable records: %v", torn)
	}
	if !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("Open = %v, want ErrCorrupt", err)
	}
}

// TestWitnessReadersPassOver: a log whose records are interleaved with
// witnesses (a Flush after each) reads back every record, in order, after
// a reopen, by Reader, Read and a read-only, salvaging Open, and Verify
// finds nothing wrong; appending after a reopen continues the LSNs.
func TestWitnessReadersPassOver(t *testing.T) {
	dir := t.TempDir()
	opts := &wal.Options{Sync: wal.SyncNever, SegmentSize: 4 << 10}
	l := openLog(t, dir, opts)
	for i := range 40 {
		appendN(t, l, i, 1)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
	if n := witnessCount(t, dir); n < 30 {
		t.Fatalf("%d witnesses, want one per Flush but where a segment rolls", n)
	}
	for _, o := range []*wal.Options{{ReadOnly: true, Salvage: true}, {SegmentSize: 4 << 10}} {
		l := openLog(t, dir, o)
		if rep, err := l.Verify(); err != nil || len(rep.Salvaged) != 0 || rep.Torn != nil {
			t.Fatalf("Verify = %+v, %v", rep, err)
		}
		if rep := l.Report(); len(rep.Salvaged) != 0 || rep.Torn != nil {
			t.Fatalf("Report = %+v", rep)
		}
		lsns, got := readAll(t, l, 1)
		if len(got) != 40 || lsns[0] != 1 || lsns[39] != 40 {
			t.Fatalf("read %d records, LSNs %v", len(got), lsns)
		}
		for i := range 40 {
			rec, err := l.Read(wal.LSN(i + 1))
			if err != nil || string(rec) != string(got[i]) {
				t.Fatalf("Read(%d) = %q, %v; want %q", i+1, rec, err, got[i])
			}
		}
		if !o.ReadOnly {
			lsn, c, err := l.Append([]byte("next"))
			if err == nil {
				err = c.Wait()
			}
			if err != nil || lsn != 41 {
				t.Fatalf("Append after reopen = %d, %v; want LSN 41", lsn, err)
			}
		}
		closeLog(t, l)
	}
}

// TestWitnessSalvageBound: a damaged region of a sealed segment under an
// empty tail that holds a record's entry and the witness after it lost
// one LSN but held two entries. The tail's name counts both: a salvage
// that bounded the entries by the LSNs lost would find the tail named past
// the segment's entries and refuse it as not the log's.
func TestWitnessSalvageBound(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{Sync: wal.SyncNever, SegmentSize: 4 << 10})
	for i := 0; ; i++ {
		appendN(t, l, i, 1)
		if len(segmentFiles(t, dir)) == 2 {
			break // no Flush after the roll: it would write a witness into the tail
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
	lay := layoutOf(t, dir)
	if last := lay[len(lay)-1]; last.seg != segmentFiles(t, dir)[0] {
		t.Fatalf("the tail holds an entry at %d, want it empty", last.off)
	}
	var r, w entryPos // a record's entry in the middle, the witness after it
	for i := 2; i+2 < len(lay); i++ {
		if lay[i].count > 0 && lay[i+1].count == 0 && lay[i+2].count > 0 {
			r, w = lay[i], lay[i+1]
			break
		}
	}
	if w.seg == "" {
		t.Fatal("no record entry followed by a witness and a record")
	}
	fileOp(t, r.seg, func(b []byte) []byte {
		b[r.off+r.hdr+1] ^= 0x01 // the record's CRC
		b[w.off+w.hdr+1] ^= 0x01 // the witness's
		return b
	})
	l, err := wal.Open(dir, &wal.Options{Salvage: true, SegmentSize: 4 << 10})
	if err != nil {
		t.Fatalf("salvaging Open: %v", err)
	}
	defer closeLog(t, l)
	sal := l.Report().Salvaged
	if len(sal) != 1 || sal[0].FirstLSN != r.first || sal[0].LastLSN != r.first || sal[0].Offset != r.off {
		t.Fatalf("Salvaged = %+v, want LSN %d lost at offset %d", sal, r.first, r.off)
	}
}

// TestWitnessWriteFailurePoisons: a witness whose write fails poisons the
// Log as any failed write does: the Flush that wrote it returns the
// error, and so does every later call.
func TestWitnessWriteFailurePoisons(t *testing.T) {
	fs := faultfs.New(0)
	l := openLog(t, t.TempDir(), &wal.Options{FS: fs, Sync: wal.SyncNever})
	appendN(t, l, 0, 1)
	fs.FailNext(wal.StoreWriteWitness)
	if err := l.Flush(); !errors.Is(err, faultfs.ErrInjected) {
		t.Fatalf("Flush = %v, want the witness write's failure", err)
	}
	if op, ok := fs.Hit(); !ok || op.Kind != wal.StoreWriteWitness {
		t.Fatalf("failed operation %+v, %v; want the witness write", op, ok)
	}
	if _, _, err := l.Append([]byte("x")); !errors.Is(err, faultfs.ErrInjected) {
		t.Fatalf("Append after the failure = %v, want the sticky error", err)
	}
	if err := l.Close(); !errors.Is(err, faultfs.ErrInjected) {
		t.Fatalf("Close = %v, want the sticky error", err)
	}
}

// TestWitnessFsyncFailurePoisons: a witness is written, not fsynced, and
// makes the log dirty, so the next Flush, or Close, fsyncs it. An fsync
// that fails there poisons the Log as any failed fsync does: that call
// returns the error, and so does every later one.
func TestWitnessFsyncFailurePoisons(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(l *wal.Log) error // the call that fsyncs the witness
	}{
		{"Flush", (*wal.Log).Flush},
		{"Close", (*wal.Log).Close},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := faultfs.New(0)
			dir := t.TempDir()
			l := openLog(t, dir, &wal.Options{FS: fs, Sync: wal.SyncNever})
			appendN(t, l, 0, 1)
			if err := l.Flush(); err != nil { // the record's fsync, then its witness
				t.Fatal(err)
			}
			if n := witnessCount(t, dir); n != 1 {
				t.Fatalf("%d witnesses after Flush, want 1", n)
			}
			fs.FailNext("fsync")
			if err := tc.call(l); !errors.Is(err, faultfs.ErrInjected) {
				t.Fatalf("%s = %v, want the failure of the witness's fsync", tc.name, err)
			}
			if _, _, err := l.Append([]byte("x")); err == nil {
				t.Fatal("Append after the failed fsync succeeded")
			}
			if tc.name != "Close" {
				if err := l.Close(); !errors.Is(err, faultfs.ErrInjected) {
					t.Fatalf("Close = %v, want the sticky error", err)
				}
			}
		})
	}
}

// TestWitnessTimerWriteFailurePoisons: under SyncAlways the committer
// writes the witness on its own once the log stays idle; a failure of
// that write, which no caller waits for, poisons the Log all the same:
// Err reports it and the next Append fails with it.
func TestWitnessTimerWriteFailurePoisons(t *testing.T) {
	fs := faultfs.New(0)
	l := openLog(t, t.TempDir(), &wal.Options{FS: fs, Sync: wal.SyncAlways})
	fs.FailNext(wal.StoreWriteWitness)
	appendN(t, l, 0, 1) // fsynced; the witness comes after an idle spell
	for deadline := time.Now().Add(10 * time.Second); l.Err() == nil && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if err := l.Err(); !errors.Is(err, faultfs.ErrInjected) {
		t.Fatalf("Err = %v after 10 s, want the witness write's failure", err)
	}
	if op, ok := fs.Hit(); !ok || op.Kind != wal.StoreWriteWitness {
		t.Fatalf("failed operation %+v, %v; want the witness write", op, ok)
	}
	if _, _, err := l.Append([]byte("x")); !errors.Is(err, faultfs.ErrInjected) {
		t.Fatalf("Append after the failure = %v, want the sticky error", err)
	}
	if err := l.Close(); !errors.Is(err, faultfs.ErrInjected) {
		t.Fatalf("Close = %v, want the sticky error", err)
	}
}

// TestTornWitnessLosesNoLSN: the witness is the last write of an idle
// log and is not fsynced with its write, so it is what a power loss most
// often tears. It holds no record: its torn tail is cut, the log goes on
// at the LSN it named, and the report must not say that LSN was lost (a
// queue lists the LSNs a repair lost as messages that may be gone).
func TestTornWitnessLosesNoLSN(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"cut after its frame length", func(b []byte) []byte { return b[:len(b)-25] }},
		{"cut in its CRC", func(b []byte) []byte { return b[:len(b)-23] }},
		{"cut before its version", func(b []byte) []byte { return b[:len(b)-21] }},
		{"cut after its version", func(b []byte) []byte { return b[:len(b)-20] }},
		{"cut in its first LSN", func(b []byte) []byte { return b[:len(b)-15] }},
		{"cut in its Synced LSN", func(b []byte) []byte { return b[:len(b)-3] }},
		{"a bit flipped in its Synced LSN", func(b []byte) []byte { b[len(b)-3] ^= 1; return b }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, &wal.Options{Sync: wal.SyncNever})
			appendN(t, l, 0, 3)
			if err := l.Flush(); err != nil { // records 1-3, then a witness of LSN 3
				t.Fatal(err)
			}
			closeLog(t, l)
			if lay := layoutOf(t, dir); lay[len(lay)-1].count != 0 {
				t.Fatal("the log does not end in a witness")
			}
			fileOp(t, segmentFiles(t, dir)[0], tc.damage)
			l = openLog(t, dir, nil)
			defer closeLog(t, l)
			torn := l.Report().Torn
			if torn == nil {
				t.Fatal("no torn tail reported")
			}
			if torn.FirstLSN != 0 && torn.LastLSN+1 != torn.FirstLSN || !strings.Contains(torn.String(), "no LSN") {
				t.Fatalf("Torn = %v (LSNs %d-%d), want a cut that lost no LSN", torn, torn.FirstLSN, torn.LastLSN)
			}
			if lsn, _, err := l.Append([]byte("next")); err != nil || lsn != 4 {
				t.Fatalf("Append = %d, %v; want LSN 4", lsn, err)
			}
		})
	}
}
