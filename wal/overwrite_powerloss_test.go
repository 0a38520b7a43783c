package wal_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/wal"
)

// TestPowerLossOverZerosAheadOfTail (1000 states over 3 seeds, 250 under
// the race detector) is the acceptance test of writing
// zeros ahead of the tail: one record is durable; the tail is then
// extended with zeros and fsynced, as the extender would; two more
// records are written over the zeros and never synced. Every state a
// power loss can leave must open, keep the durable record and keep a
// prefix of the others, including the states where a later sector
// reached the disk and an earlier one did not: the entries after the
// hole say nothing after the durable record was fsynced when they were
// written, so the hole is a tear (the tear rule, repair.go).
func TestPowerLossOverZerosAheadOfTail(t *testing.T) {
	root := t.TempDir()
	fsys, err := crashfs.New(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "log")
	l, err := wal.Open(dir, &wal.Options{FS: fsys, Sync: wal.SyncNever})
	if err != nil {
		t.Fatal(err)
	}
	recs := [][]byte{bytes.Repeat([]byte("1"), 700), bytes.Repeat([]byte("2"), 1500), bytes.Repeat([]byte("3"), 1500)}
	if _, _, err := l.Append(recs[0]); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil { // record 1 durable
		t.Fatal(err)
	}
	if n := witnessCount(t, dir); n != 1 { // Flush named it: the zeros go after the witness
		t.Fatalf("%d witnesses after Flush, want 1", n)
	}
	extend(t, fsys, filepath.Join(dir, "00000000000000000001"), 8192)
	for _, r := range recs[1:] {
		_, c, err := l.Append(r)
		if err == nil {
			err = c.Wait() // written (SyncNever), not synced
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.Image(); err != nil { // the power goes: records 2 and 3 written, not synced
		t.Fatal(err)
	}
	l.Close()
	refused, states := 0, raceScaled(1000, 4)
	for i := range states {
		dst := filepath.Join(t.TempDir(), "s")
		st, err := fsys.Materialize(dst, rand.New(rand.NewPCG(5+uint64(i%3), uint64(i/3))))
		if err != nil {
			t.Fatal(err)
		}
		l2, err := wal.Open(filepath.Join(dst, "log"), nil)
		if err != nil {
			refused++
			t.Errorf("state %d (%s): Open: %v", i, st.Desc, err)
			continue
		}
		_, got := readAll(t, l2, 1)
		l2.Close()
		if len(got) == 0 || !bytes.Equal(got[0], recs[0]) {
			t.Fatalf("state %d (%s): the durable record was lost: %d records", i, st.Desc, len(got))
		}
		for k := range got {
			if !bytes.Equal(got[k], recs[k]) {
				t.Fatalf("state %d (%s): record %d is not what was written", i, st.Desc, k+1)
			}
		}
	}
	if refused > 0 {
		t.Logf("%d of %d states refused", refused, states)
	}
}

// extend writes n zeros past the file's end and fsyncs them.
func extend(t *testing.T, fsys *crashfs.FS, path string, n int) {
	t.Helper()
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, n), fi.Size()); err != nil {
		t.Fatal(err)
	}
	if err := f.Datasync(); err != nil {
		t.Fatal(err)
	}
}

// TestPowerLossAfterWitnessAndRoll: a Flush writes a witness and leaves
// it unsynced; records written next fill the segment and roll it, and
// more go to the new tail, none of them flushed. The roll fsyncs the
// sealed segment, witness and all. Every state a power loss can leave
// must keep the flushed records and a prefix of the others, and open,
// but for a hole in appended bytes before bytes that were kept, which is
// refused (ErrCorrupt), as a closed log's damage is: the witness must
// change none of this. 600 states, 150 under the race detector.
func TestPowerLossAfterWitnessAndRoll(t *testing.T) {
	root := t.TempDir()
	fsys, err := crashfs.New(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "log")
	l, err := wal.Open(dir, &wal.Options{FS: fsys, Sync: wal.SyncNever, SegmentSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	recs := make([][]byte, 9)
	for i := range recs {
		recs[i] = bytes.Repeat([]byte{byte('a' + i)}, 700+37*i)
	}
	write := func(i int) {
		_, c, err := l.Append(recs[i])
		if err == nil {
			err = c.WaitWritten()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		write(i)
	}
	if err := l.Flush(); err != nil { // records 1-3 durable, then a witness
		t.Fatal(err)
	}
	if n := witnessCount(t, dir); n != 1 {
		t.Fatalf("%d witnesses after Flush, want 1", n)
	}
	for i := 3; i < len(recs); i++ {
		write(i)
	}
	if n := len(l.Segments()); n < 2 {
		t.Fatalf("%d segments, want a roll after the witness", n)
	}
	if err := fsys.Image(); err != nil { // the power goes
		t.Fatal(err)
	}
	l.Close()
	holes, refused, states := 0, 0, raceScaled(600, 4)
	for i := range states {
		dst := filepath.Join(t.TempDir(), "s")
		st, err := fsys.Materialize(dst, rand.New(rand.NewPCG(11+uint64(i%3), uint64(i/3))))
		if err != nil {
			t.Fatal(err)
		}
		if st.Holes {
			holes++
		}
		l2, err := wal.Open(filepath.Join(dst, "log"), &wal.Options{SegmentSize: 4096}) // the writer's
		if err != nil {
			if !st.Holes || !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("state %d (%s): Open: %v", i, st.Desc, err)
			}
			refused++
			continue
		}
		_, got := readAll(t, l2, 1)
		l2.Close()
		if len(got) < 3 {
			t.Fatalf("state %d (%s): %d records, the 3 flushed ones lost", i, st.Desc, len(got))
		}
		for k := range got {
			if !bytes.Equal(got[k], recs[k]) {
				t.Fatalf("state %d (%s): record %d is not what was written", i, st.Desc, k+1)
			}
		}
	}
	t.Logf("%d of %d states had a hole, %d refused", holes, states, refused)
}
