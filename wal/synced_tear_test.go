package wal_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/wal"
)

// syncedRecord is record i of syncedLog: 700 bytes, so that each entry
// spans a sector boundary and a torn sector can lose part of one entry
// and keep the next.
func syncedRecord(i int) []byte { return bytes.Repeat([]byte{byte('1' + i)}, 700) }

// syncedLog writes three records (syncedRecord), one entry each, with
// Sync: SyncNever; flushed[i] makes record i+1 durable (Flush) before the
// next is written. It returns the directory and the entries' layout.
func syncedLog(t *testing.T, flushed [3]bool) (string, []entryPos) {
	t.Helper()
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{Sync: wal.SyncNever})
	for i := range 3 {
		_, c, err := l.Append(syncedRecord(i))
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			t.Fatal(err)
		}
		if flushed[i] {
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	closeLog(t, l)
	lay := recordEntries(layoutOf(t, dir))
	if len(lay) != 3 {
		t.Fatalf("%d entries with records, want 3", len(lay))
	}
	return dir, lay
}

// recordEntries returns the entries of lay that hold records: all but
// the witnesses a Flush writes.
func recordEntries(lay []entryPos) []entryPos {
	return slices.DeleteFunc(slices.Clone(lay), func(e entryPos) bool { return e.count == 0 })
}

// zeroEntry zeroes the bytes of the entry e, as sectors that were never
// written over zeros leave them.
func zeroEntry(t *testing.T, e entryPos) {
	t.Helper()
	fileOp(t, e.seg, func(b []byte) []byte { clear(b[e.off : e.off+e.size]); return b })
}

// zerosAhead appends n zeros to the file, as writing zeros ahead of the
// tail leaves the file's end where no entry was written over them.
func zerosAhead(t *testing.T, path string, n int) {
	t.Helper()
	fileOp(t, path, func(b []byte) []byte { return append(b, make([]byte, n)...) })
}

// checkSynced checks that l holds syncedRecord 0..n-1 from LSN 1.
func checkSynced(t *testing.T, l *wal.Log, n int) {
	t.Helper()
	_, got := readAll(t, l, 1)
	if len(got) != n {
		t.Fatalf("%d records, want %d", len(got), n)
	}
	for i := range got {
		if !bytes.Equal(got[i], syncedRecord(i)) {
			t.Fatalf("record %d is not what was written", i+1)
		}
	}
}

// TestTearRuleSyncedLSN zeroes the second of three entries, the third
// kept, in a file that ends in zeros ahead of the tail. When the third
// was written after an fsync that covered the second, the second was
// durable: its loss is damage, and Open refuses it. When no fsync covered
// the second before the third was written, a power loss can tear the
// second and keep the third: Open cuts the tail after the first.
func TestTearRuleSyncedLSN(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flushed [3]bool
		corrupt bool
	}{
		{"third written after the second was fsynced", [3]bool{true, true, false}, true},
		{"third written before any fsync of the second", [3]bool{true, false, false}, false},
		{"nothing fsynced but by the close", [3]bool{false, false, false}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, lay := syncedLog(t, tc.flushed)
			zeroEntry(t, lay[1])
			zerosAhead(t, lay[1].seg, 4096)
			l, err := wal.Open(dir, nil)
			if tc.corrupt {
				if !errors.Is(err, wal.ErrCorrupt) {
					t.Fatalf("Open = %v, want ErrCorrupt: a durable record was lost", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer closeLog(t, l)
			if rep := l.Report(); rep.Torn == nil || rep.Torn.Offset != lay[1].off {
				t.Fatalf("Report = %+v, want a tear at offset %d", rep, lay[1].off)
			}
			checkSynced(t, l, 1)
		})
	}
}

// TestTearRuleShape: entries that say no fsync covered the damage make it
// a tear only where a power loss during writes over zeros ahead of the
// tail could have left it: an aligned sector of the damage never written
// (zeros), and the file ending, past the valid entries, in a whole
// aligned sector of zeros. Close (Flush, SyncInterval's fsyncs) makes
// records durable after their entries were written, and a closed log
// ends at its last entry: damage to it, or a flipped bit, is refused.
// Every log here was written under SyncNever and closed, nothing fsynced
// before the close.
func TestTearRuleShape(t *testing.T) {
	zeroed := func(t *testing.T, e entryPos) { zeroEntry(t, e) }
	flipped := func(t *testing.T, e entryPos) {
		fileOp(t, e.seg, func(b []byte) []byte { b[e.off+e.size/2] ^= 0x40; return b })
	}
	unaligned := func(t *testing.T, e entryPos) { // zeros inside one sector, none from a sector's start
		fileOp(t, e.seg, func(b []byte) []byte {
			from := e.off + 512 - e.off%512 + 10
			clear(b[from : from+100])
			return b
		})
	}
	for _, tc := range []struct {
		name   string
		damage func(*testing.T, entryPos)
		zeros  int // appended after the last entry
		torn   bool
	}{
		{"lost sectors, zeros ahead", zeroed, 4096, true},
		{"lost sectors, the log ends at its last entry", zeroed, 0, false},
		{"lost sectors, zeros short of a whole sector", zeroed, 300, false},
		{"a flipped bit, zeros ahead", flipped, 4096, false},
		{"a hole inside a sector, zeros ahead", unaligned, 4096, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, lay := syncedLog(t, [3]bool{})
			tc.damage(t, lay[1])
			zerosAhead(t, lay[1].seg, tc.zeros)
			l, err := wal.Open(dir, nil)
			if !tc.torn {
				if err == nil {
					torn := l.Report().Torn
					closeLog(t, l)
					t.Fatalf("Open cut durable records as a tear: %v", torn)
				}
				if !errors.Is(err, wal.ErrCorrupt) {
					t.Fatalf("Open = %v, want ErrCorrupt", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer closeLog(t, l)
			if rep := l.Report(); rep.Torn == nil || rep.Torn.Offset != lay[1].off {
				t.Fatalf("Report = %+v, want a tear at offset %d", rep, lay[1].off)
			}
			checkSynced(t, l, 1)
		})
	}
}

// TestTearRulePassesOverCopies: a valid entry after the damage that
// cannot continue the log (its records start at or before L) is not one
// of the log's entries but bytes a record holds, a copy of an earlier
// entry say, as a log of log segments has: it is passed over, as before
// version 2, and a torn tail stays a tear.
func TestTearRulePassesOverCopies(t *testing.T) {
	t.Run("inside the torn last entry", func(t *testing.T) {
		dir := t.TempDir()
		l := openLog(t, dir, &wal.Options{Sync: wal.SyncAlways})
		appendN(t, l, 0, 1)
		appendN(t, l, 1, 1)
		lay := layoutOf(t, dir)
		b, err := os.ReadFile(lay[0].seg)
		if err != nil {
			t.Fatal(err)
		}
		rec := append([]byte("a copy of the first entry: "), b[lay[0].off:lay[0].off+lay[0].size]...)
		rec = append(rec, make([]byte, 64)...)
		_, c, err := l.Append(rec)
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			t.Fatal(err)
		}
		closeLog(t, l)
		lay = layoutOf(t, dir)
		last := lay[len(lay)-1]
		fileOp(t, last.seg, func(b []byte) []byte { return b[:last.off+last.size-32] }) // its last sector lost
		l, err = wal.Open(dir, nil)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer closeLog(t, l)
		if rep := l.Report(); rep.Torn == nil || rep.Torn.Offset != last.off {
			t.Fatalf("Report = %+v, want a tear at offset %d", rep, last.off)
		}
		checkRecords(t, l, 1, 0, 2)
	})
	t.Run("after the damage", func(t *testing.T) {
		dir, lay := syncedLog(t, [3]bool{})
		first, err := os.ReadFile(lay[0].seg)
		if err != nil {
			t.Fatal(err)
		}
		frame := first[lay[0].off : lay[0].off+lay[0].size]
		zeroEntry(t, lay[1])
		fileOp(t, lay[0].seg, func(b []byte) []byte { return append(b, frame...) })
		zerosAhead(t, lay[0].seg, 4096)
		l, err := wal.Open(dir, nil)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer closeLog(t, l)
		if rep := l.Report(); rep.Torn == nil || rep.Torn.Offset != lay[1].off {
			t.Fatalf("Report = %+v, want a tear at offset %d", rep, lay[1].off)
		}
		checkSynced(t, l, 1)
	})
}

// gatedFS is a crashfs.FS whose Datasync calls on segment files wait while
// the gate is closed: an fsync held in flight.
type gatedFS struct {
	*crashfs.FS
	mu      sync.Mutex
	gate    chan struct{} // closed: open; nil: open
	waiting chan struct{} // receives once an fsync waits at the gate
}

func (g *gatedFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return gatedFile{f, g}, nil
}

func (g *gatedFS) Open(name string) (wal.File, error) { return g.OpenFile(name, os.O_RDONLY, 0) }

// hold closes the gate: the next fsyncs wait until release.
func (g *gatedFS) hold() {
	g.mu.Lock()
	g.gate = make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedFS) release() {
	g.mu.Lock()
	close(g.gate)
	g.gate = nil
	g.mu.Unlock()
}

type gatedFile struct {
	wal.File
	g *gatedFS
}

func (f gatedFile) Datasync() error {
	f.g.mu.Lock()
	gate := f.g.gate
	f.g.mu.Unlock()
	if gate != nil {
		f.g.waiting <- struct{}{}
		<-gate
	}
	return f.File.Datasync()
}

// TestPowerLossWrittenDuringFsync: under SyncAlways a group with a
// WaitWritten caller is written while an fsync is in flight, so several
// entries can be written and unsynced at a power loss. Every state the
// loss can leave must keep every record whose Wait returned nil before
// it, and deliver only a prefix of what was written.
//
// Over zeros written and fsynced ahead of the tail, the loss tears the
// writes at sector and page units: every state must open, the ones with
// later entries kept after a hole included (the tear rule). Appended to
// the file's end (no zeros ahead), the loss can leave a hole anywhere in
// the appended bytes and the file ends at what it kept: a hole before
// valid entries is then refused (ErrCorrupt), since a closed log ends so
// too and its records are durable; every state without a hole must open.
// With witness, the log stays idle after record 1 until a witness of it
// is written (witness.go), before the zeros and the rest: it must change
// none of this. 600 states per case, 300 under the race detector.
func TestPowerLossWrittenDuringFsync(t *testing.T) {
	for _, ahead := range []bool{true, false} {
		for _, witness := range []bool{false, true} {
			t.Run(fmt.Sprintf("zeros-ahead=%v/witness=%v", ahead, witness), func(t *testing.T) {
				powerLossDuringFsync(t, ahead, witness)
			})
		}
	}
}

func powerLossDuringFsync(t *testing.T, ahead, witness bool) {
	root := t.TempDir()
	cfs, err := crashfs.New(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedFS{FS: cfs, waiting: make(chan struct{}, 8)}
	dir := filepath.Join(root, "log")
	// AppendOnly: the zeros ahead of the tail are the test's (ahead), so
	// that without them the writes are appended at the file's end.
	l, err := wal.Open(dir, &wal.Options{FS: g, Sync: wal.SyncAlways, AppendOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	recs := make([][]byte, 8)
	for i := range recs {
		recs[i] = bytes.Repeat([]byte{byte('a' + i)}, 100+60*i)
	}
	mustAppend := func(i int) *wal.Commit {
		_, c, err := l.Append(recs[i])
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if err := mustAppend(0).Wait(); err != nil { // record 1 durable
		t.Fatal(err)
	}
	// The witness may come before the test looks at the size (2 ms after
	// the fsync): wait for growth past record 1's frame, not past the size
	// seen now.
	if witness && (!awaitGrowth(l, firstFrameEnd(t, dir)) || witnessCount(t, dir) != 1) {
		t.Fatal("no witness of record 1 was written")
	}
	if ahead {
		extend(t, cfs, filepath.Join(dir, "00000000000000000001"), 8192)
	}
	g.hold()
	c2 := mustAppend(1)
	done2 := make(chan error, 1)
	go func() { done2 <- c2.Wait() }()
	<-g.waiting // record 2's fsync is in flight
	for i := 2; i < len(recs); i++ {
		if err := mustAppend(i).WaitWritten(); err != nil { // written during the fsync
			t.Fatal(err)
		}
	}
	if err := cfs.Image(); err != nil { // the power goes: only record 1 acknowledged
		t.Fatal(err)
	}
	g.release()
	<-done2
	l.Close()
	holes, refused, perSeed := 0, 0, raceScaled(200, 2)
	for seed := range uint64(3) {
		for i := range perSeed {
			dst := filepath.Join(t.TempDir(), "s")
			st, err := cfs.Materialize(dst, rand.New(rand.NewPCG(seed, uint64(i))))
			if err != nil {
				t.Fatal(err)
			}
			if st.Holes {
				holes++
			}
			l2, err := wal.Open(filepath.Join(dst, "log"), nil)
			if err != nil {
				if ahead || !st.Holes || !errors.Is(err, wal.ErrCorrupt) {
					t.Fatalf("seed %d state %d (%s): Open: %v", seed, i, st.Desc, err)
				}
				refused++
				continue
			}
			_, got := readAll(t, l2, 1)
			l2.Close()
			if len(got) < 1 {
				t.Fatalf("seed %d state %d (%s): the acknowledged record was lost", seed, i, st.Desc)
			}
			for k := range got {
				if !bytes.Equal(got[k], recs[k]) {
					t.Fatalf("seed %d state %d (%s): record %d is not what was written", seed, i, st.Desc, k+1)
				}
			}
		}
	}
	if holes == 0 {
		t.Fatal("no state with a hole: the test shows nothing")
	}
	if !ahead && refused == 0 {
		t.Fatalf("none of %d states with a hole was refused: the writes were not appended at the file's end", holes)
	}
	t.Logf("%d of %d states had a hole, %d refused", holes, 3*perSeed, refused)
}

// TestTearRuleSegmentStart: damage to the first entry of the last
// segment, later entries kept, is judged by the end of the segment
// before: a tear when no fsync covered the damaged entry before the later
// ones were written, ErrCorrupt when one did.
func TestTearRuleSegmentStart(t *testing.T) {
	for _, flush := range []bool{false, true} {
		t.Run(fmt.Sprintf("flush=%v", flush), func(t *testing.T) {
			dir, first := tornAtSegmentStart(t, flush)
			tail := []entryPos{first}
			opts := wal.Options{SegmentSize: 4 << 10}
			l, err := wal.Open(dir, &opts)
			if flush {
				if !errors.Is(err, wal.ErrCorrupt) {
					t.Fatalf("Open = %v, want ErrCorrupt", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer closeLog(t, l)
			if rep := l.Report(); rep.Torn == nil || rep.Torn.Segment != tail[0].seg || rep.Torn.Offset != 0 {
				t.Fatalf("Report = %+v, want a tear at the start of %s", rep, tail[0].seg)
			}
			checkRecords(t, l, 1, 0, int(tail[0].first-1))
		})
	}
}

// TestVerifyTearRule: Verify, on a read-only Log, judges damage at the
// start of the last segment by the tear rule as Open does.
func TestVerifyTearRule(t *testing.T) {
	for _, flush := range []bool{false, true} {
		t.Run(fmt.Sprintf("flush=%v", flush), func(t *testing.T) {
			dir, tail := tornAtSegmentStart(t, flush)
			l, err := wal.Open(dir, &wal.Options{ReadOnly: true, SegmentSize: 4 << 10})
			if flush {
				if !errors.Is(err, wal.ErrCorrupt) {
					t.Fatalf("Open = %v, want ErrCorrupt", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer closeLog(t, l)
			rep, err := l.Verify()
			if err != nil || rep.Torn == nil || rep.Torn.Segment != tail.seg || rep.Torn.Offset != 0 {
				t.Fatalf("Verify = %+v, %v; want a tear at the start of %s", rep, err, tail.seg)
			}
		})
	}
}

// tornAtSegmentStart writes a log of two segments, the last one holding
// two sectors or more, each record fsynced before the next is written if
// flush, zeroes the first sector of the last segment, as a write over
// zeros ahead of the tail that never reached it, appends a page of those
// zeros, and returns the first entry of the last segment.
func tornAtSegmentStart(t *testing.T, flush bool) (string, entryPos) {
	t.Helper()
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{SegmentSize: 4 << 10, Sync: wal.SyncNever})
	for n := 0; ; n++ {
		if segs := segmentFiles(t, dir); len(segs) >= 2 {
			if end, _ := writtenEnd(t, dir, segs[len(segs)-1]); end >= 1024 {
				break
			}
		}
		appendN(t, l, n, 1)
		if flush {
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	closeLog(t, l)
	tail := lastSegEntries(layoutOf(t, dir))
	if len(tail) < 2 {
		t.Fatalf("%d entries in the last segment, want 2 at least", len(tail))
	}
	fileOp(t, tail[0].seg, func(b []byte) []byte { clear(b[:512]); return append(b, make([]byte, 4096)...) })
	return dir, tail[0]
}

// TestTearRuleZeroPayload: records whose payload holds zeros meet the
// shape condition (an aligned sector of zeros in the damage) with their
// own bytes, so one flipped bit in a flushed record, in a file that ends
// in zeros ahead of the tail, is refused only because the witness Flush
// wrote names the records durable.
func TestTearRuleZeroPayload(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{Sync: wal.SyncNever})
	for i := range 3 {
		rec := make([]byte, 1500) // more than two sectors of zeros
		rec[0] = byte('a' + i)
		_, c, err := l.Append(rec)
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil { // records 1-3 durable; no entry names it
		t.Fatal(err)
	}
	closeLog(t, l)
	lay := layoutOf(t, dir)
	e := lay[1]
	fileOp(t, e.seg, func(b []byte) []byte { b[e.off+40] ^= 0x01; return b })
	zerosAhead(t, e.seg, 4096) // as the extender leaves a flushed, open log
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

// TestTearRuleOneZeroByte: the shape condition clips the sector that holds
// the damage start B at B, so when B is the last byte of a sector one zero
// byte meets it: one flipped bit that zeroes the length prefix (0x40) of a
// 64-byte entry there, in a flushed log that ends in zeros ahead of the
// tail, would cut the 17 durable records from it on but for the witness
// Flush wrote.
func TestTearRuleOneZeroByte(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{Sync: wal.SyncNever})
	for range 80 {
		_, c, err := l.Append(bytes.Repeat([]byte{'x'}, 38)) // a 64-byte entry, 65 with its length
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	closeLog(t, l)
	lay := layoutOf(t, dir)
	i := slices.IndexFunc(lay, func(e entryPos) bool { return e.off%512 == 511 })
	if i < 0 || i == len(lay)-1 {
		t.Fatalf("no entry but the last starts at a sector's last byte")
	}
	e := lay[i]
	fileOp(t, e.seg, func(b []byte) []byte { b[e.off] ^= 0x40; return b }) // length 64 -> 0
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
