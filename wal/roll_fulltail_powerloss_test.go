package wal_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/wal"
)

// probeEntries returns the bytes that records 0 to n-1, one entry each,
// take in a segment.
func probeEntries(t *testing.T, n int) []byte {
	t.Helper()
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{Sync: wal.SyncNever, MaxGroupBytes: 1})
	appendN(t, l, 0, n)
	closeLog(t, l)
	segs := segmentFiles(t, dir)
	if len(segs) != 1 {
		t.Fatalf("%d segments, want 1", len(segs))
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fullTailTries is how many times fullTailLog writes its log before it
// fails: a witness can take an index between two of its appends.
const fullTailTries = 20

// fullTailLog writes into dir the state a power loss leaves after the
// entry of record n-1 took the first segment to exactly opts.SegmentSize:
// the segment was fsynced whole, and the name of the segment its roll
// created, n+1, was lost with the directory fsync that would have made it
// durable. The segment is the tail then, full. Under SyncAlways a
// starved machine can leave the log idle for witnessIdle between two
// appends, and the witness written then takes an index of its own (the
// roll then names its segment n+2 and the first segment holds the
// witness too): the log is written again, into an emptied dir, until it
// has the shape the tests need, fullTailTries times at most.
func fullTailLog(t *testing.T, dir string, opts *wal.Options, n int) {
	t.Helper()
	var segs []string
	for try := 1; ; try++ {
		l := openLog(t, dir, opts)
		appendN(t, l, 0, n)
		closeLog(t, l)
		segs = segmentFiles(t, dir)
		if len(segs) == 2 && filepath.Base(segs[1]) == fmt.Sprintf("%020d", n+1) {
			break
		}
		if try == fullTailTries {
			t.Fatalf("segments %v after %d tries; want the first, full, and the empty %020d its roll created", segs, try, n+1)
		}
		t.Logf("try %d: segments %v (a witness took an index between appends); writing the log again", try, segs)
		emptyDir(t, dir)
	}
	if fi, err := os.Stat(segs[0]); err != nil || fi.Size() != opts.SegmentSize {
		t.Fatalf("the first segment: %v, %v; want %d bytes", fi.Size(), err, opts.SegmentSize)
	}
	if err := os.Remove(segs[1]); err != nil {
		t.Fatal(err)
	}
}

// emptyDir removes everything in dir, leaving dir itself.
func emptyDir(t *testing.T, dir string) {
	t.Helper()
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range names {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPowerLossTwiceOverFullTail: a power loss can leave the last segment
// whole at exactly SegmentSize (the entry that took it there sealed it,
// and the name of the segment its roll created was lost). The Open after
// it, and the appends after that Open, must not write into that full
// segment: tidwall/wal only rolls a tail past SegmentSize before a write,
// so the next entry would land in it and its roll create a segment named
// past it, and a second power loss could keep that name and lose the
// entry, leaving a full segment, whole, under an empty tail named past it:
// to Open, a segment missing between them, refused with ErrCorrupt
// though no record lost was acknowledged. A repair can leave such a tail
// too, cutting zeros after it, or an entry torn after it (which an
// earlier release, writing into the full segment, could leave under its
// roll's empty tail). At every durable operation of the reopen, an
// append, a Flush and the Close, the states a power loss can leave
// (crashfs: names as last fsynced, as at the loss, or mixed; unsynced
// bytes lost, kept, torn, zeroed or followed by garbage) must open
// read-only, plainly and salvaging, all with the writer's SegmentSize,
// and hold the same records: the first ones, and the appended one if the
// Flush returned nil; and the plain Open must take an append that a
// reopen reads back. Only a state with a hole may be refused
// (ErrCorrupt), as in TestPowerLossInGroupSpanningRoll.
func TestPowerLossTwiceOverFullTail(t *testing.T) {
	const records = 6
	entries := probeEntries(t, records+1)
	next := probeEntries(t, records)
	size := int64(len(next))
	torn := entries[size : size+int64(len(entries)-len(next))/2] // half of record 6's entry
	for _, c := range []struct {
		name  string
		after []byte // bytes after the full segment's last entry
		tail  int    // the empty tail after it, by index; 0 for none
	}{
		{"roll's name lost", nil, 0},
		{"zeros after the full segment's end", make([]byte, 100), 0},
		{"entry torn after the full segment's end, under its roll's empty tail", torn, records + 2},
	} {
		for _, mode := range []struct {
			name string
			sync wal.SyncMode
		}{{"never", wal.SyncNever}, {"always", wal.SyncAlways}} {
			t.Run(c.name+"/"+mode.name, func(t *testing.T) {
				powerLossOverFullTail(t, size, mode.sync, records, func(dir string) error {
					return damageFullTail(dir, c.after, c.tail)
				})
			})
		}
	}
}

// damageFullTail appends after to the log's only segment and creates an
// empty segment of index tail (0: none).
func damageFullTail(dir string, after []byte, tail int) error {
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%020d", 1)), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write(after); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil || tail == 0 {
		return err
	}
	return os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d", tail)), nil, 0o600)
}

// powerLossOverFullTail builds the state after the first power loss
// (fullTailLog, then damage), and loses power again at each durable
// operation of a reopen that appends a record and flushes, under sync;
// from each, fullTailStates states are built (crashfs) and checked.
func powerLossOverFullTail(t *testing.T, size int64, sync wal.SyncMode, records int, damage func(dir string) error) {
	// Under SyncNever no witness comes from a timer, so the durable
	// operations are the same at every run, and a segment is only
	// appended to; under SyncAlways the tail is extended with zeros ahead
	// of the records that overwrite them, and fsynced so.
	opts := wal.Options{SegmentSize: size, Sync: sync, MaxGroupBytes: 1, Locked: true}
	for crashAt := 1; ; crashAt++ {
		root := t.TempDir()
		dir := filepath.Join(root, "log")
		fullTailLog(t, dir, &opts, records)
		if err := damage(dir); err != nil {
			t.Fatal(err)
		}
		cfs, err := crashfs.New(root, crashAt) // the first loss's state counts as durable
		if err != nil {
			t.Fatal(err)
		}
		o := opts
		o.FS = cfs
		acked := appendAfterReopen(dir, &o, records)
		if !cfs.Crashed() {
			if !acked {
				t.Fatal("no power loss, and the append was not acknowledged")
			}
			t.Logf("%d durable operations, %d states each", crashAt-1, fullTailStates)
			return
		}
		for s := range fullTailStates {
			dst := filepath.Join(t.TempDir(), "state")
			st, err := cfs.Materialize(dst, rand.New(rand.NewPCG(uint64(crashAt), uint64(s))))
			if err != nil {
				t.Fatal(err)
			}
			where := fmt.Sprintf("power loss at durable operation %d, state %d (%s)", crashAt, s, st.Desc)
			checkFullTailState(t, where, filepath.Join(dst, "log"), st, opts, records, acked)
		}
	}
}

// fullTailStates is how many crash states are built at each durable
// operation of the reopen: 24, 6 under the race detector.
var fullTailStates = raceScaled(24, 4)

// appendAfterReopen opens the log, appends record n, flushes and closes
// the log; it reports whether the Flush acknowledged the record.
func appendAfterReopen(dir string, opts *wal.Options, n int) bool {
	l, err := wal.Open(dir, opts)
	if err != nil {
		return false
	}
	defer l.Close() // after the power loss it fails, and nothing it does counts
	if _, _, err := l.Append(record(n)); err != nil {
		return false
	}
	return l.Flush() == nil
}

// checkFullTailState opens the state read-only, salvaging and plainly,
// with the writer's options, and checks that all hold records 0 to n-1,
// then record n if acked (and nothing else, it being optional otherwise);
// then appends a record and reads it back after a reopen. A state with a
// hole (st) may be refused with ErrCorrupt by the read-only Open.
func checkFullTailState(t *testing.T, where, dir string, st crashfs.State, opts wal.Options, n int, acked bool) {
	t.Helper()
	ro := opts
	ro.ReadOnly = true
	l, err := wal.Open(dir, &ro)
	if err != nil && errors.Is(err, wal.ErrCorrupt) && st.MayRefuse(filepath.Dir(dir)) {
		return
	}
	if err != nil {
		t.Fatalf("%s: read-only Open: %v", where, err)
	}
	_, seen := readAll(t, l, 1)
	closeLog(t, l)
	salvaged := readSalvaged(t, where, dir, opts)
	l, err = wal.Open(dir, &opts)
	if err != nil {
		t.Fatalf("%s: Open: %v", where, err)
	}
	_, got := readAll(t, l, 1)
	if len(got) < n || len(got) > n+1 || acked && len(got) != n+1 {
		t.Fatalf("%s: %d records, want %d (and the appended one, acknowledged: %v)", where, len(got), n, acked)
	}
	for i := range got {
		if !bytes.Equal(got[i], record(i)) {
			t.Fatalf("%s: record %d is not what was written", where, i)
		}
	}
	if len(seen) != len(got) || len(salvaged) != len(got) {
		t.Fatalf("%s: a read-only Open shows %d records, a salvaging one %d, the Open %d", where, len(seen), len(salvaged), len(got))
	}
	lsn := appendN(t, l, len(got), 1)[0]
	closeLog(t, l)
	l = openLog(t, dir, &opts)
	defer closeLog(t, l)
	if rec, err := l.Read(lsn); err != nil || !bytes.Equal(rec, record(len(got))) {
		t.Fatalf("%s: the record appended after the repair, at LSN %d: %q, %v", where, lsn, rec, err)
	}
}

// readSalvaged opens a copy of dir with Salvage and returns its records.
func readSalvaged(t *testing.T, where, dir string, opts wal.Options) [][]byte {
	t.Helper()
	cp := t.TempDir()
	copyDir(t, dir, cp)
	opts.Salvage = true
	l, err := wal.Open(cp, &opts)
	if err != nil {
		t.Fatalf("%s: salvaging Open: %v", where, err)
	}
	defer closeLog(t, l)
	_, recs := readAll(t, l, 1)
	return recs
}
