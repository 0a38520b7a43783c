package wal_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/wal"
)

// syncedLog writes three records, one entry each, with Sync: SyncNever;
// flushed[i] makes record i+1 durable (Flush) before the next is written.
// It returns the directory and the entries' layout.
func syncedLog(t *testing.T, flushed [3]bool) (string, []entryPos) {
	t.Helper()
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{Sync: wal.SyncNever})
	for i := range 3 {
		appendN(t, l, i, 1)
		if flushed[i] {
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	closeLog(t, l)
	lay := layoutOf(t, dir)
	if len(lay) != 3 {
		t.Fatalf("%d entries, want 3", len(lay))
	}
	return dir, lay
}

// zeroEntry zeroes the bytes of the entry e, as a lost sector leaves them.
func zeroEntry(t *testing.T, e entryPos) {
	t.Helper()
	fileOp(t, e.seg, func(b []byte) []byte { clear(b[e.off : e.off+e.size]); return b })
}

// TestTearRuleSyncedLSN zeroes the second of three entries, the third
// kept. When the third was written after an fsync that covered the
// second, the second was durable: its loss is damage, and Open refuses
// it. When no fsync covered the second before the third was written, a
// power loss can tear the second and keep the third: Open cuts the tail
// after the first.
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
			checkRecords(t, l, 1, 0, 1)
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
		l, err := wal.Open(dir, nil)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer closeLog(t, l)
		if rep := l.Report(); rep.Torn == nil || rep.Torn.Offset != lay[1].off {
			t.Fatalf("Report = %+v, want a tear at offset %d", rep, lay[1].off)
		}
		checkRecords(t, l, 1, 0, 1)
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
// loss can leave, holes in the unsynced bytes with later entries kept
// included, must open and keep every record whose Wait returned nil
// before it.
func TestPowerLossWrittenDuringFsync(t *testing.T) {
	root := t.TempDir()
	cfs, err := crashfs.New(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedFS{FS: cfs, waiting: make(chan struct{}, 8)}
	l, err := wal.Open(filepath.Join(root, "log"), &wal.Options{FS: g, Sync: wal.SyncAlways})
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
	holes := 0
	for seed := range uint64(3) {
		for i := range 200 {
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
				t.Fatalf("seed %d state %d (%s): Open: %v", seed, i, st.Desc, err)
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
	t.Logf("%d of 600 states had a hole", holes)
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
// three entries or more, each record fsynced before the next is written
// if flush, and zeroes the first entry of the last segment, which it
// returns.
func tornAtSegmentStart(t *testing.T, flush bool) (string, entryPos) {
	t.Helper()
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{SegmentSize: 4 << 10, Sync: wal.SyncNever})
	for n, more := 0, 3; more > 0; n++ {
		if len(segmentFiles(t, dir)) >= 2 {
			more--
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
	zeroEntry(t, tail[0])
	return dir, tail[0]
}
