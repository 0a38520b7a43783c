package wal

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
)

// failDirFS is the real file system whose directory fsyncs fail while on
// is set.
type failDirFS struct {
	OSFS
	on *atomic.Bool
}

func (f failDirFS) SyncDir(name string) error {
	if f.on.Load() {
		return errInjected
	}
	return f.OSFS.SyncDir(name)
}

// TestFailureBetweenParts: a batch written in parts (one that rolls) fails
// whole when the disk fails between its parts, after the first part was
// written: at the sealed segment's fsync, at the directory's, or at the
// write of the second part (before or after its bytes reach the file).
// Every commit of the batch, the first part's too, fails with the
// failure, the log is poisoned, neither readers nor DurableLSN count any
// record of the batch, and a plain Open of the directory then reads the
// records appended, in order, from the first, and takes new ones.
func TestFailureBetweenParts(t *testing.T) {
	for _, mode := range []struct {
		name string
		sync SyncMode
	}{{"always", SyncAlways}, {"interval", SyncInterval}, {"never", SyncNever}} {
		for _, fail := range []string{"sealed fsync", "directory fsync", "second write",
			"second write after bytes reach the file"} {
			t.Run(mode.name+"/"+fail, func(t *testing.T) {
				failBetweenParts(t, mode.sync, fail)
			})
		}
	}
}

func failBetweenParts(t *testing.T, mode SyncMode, fail string) {
	dir := t.TempDir()
	rec := func(i int) []byte {
		b := make([]byte, 1500) // a frame of 1529 bytes: a 4 KiB segment rolls at its third
		b[0] = byte('a' + i)
		return b
	}
	var on atomic.Bool
	var writes atomic.Int32 // batch writes since on was set
	f := faults{
		writeBatch: func(st store, b *storeBatch) error {
			if b.witness || !on.Load() || writes.Add(1) != 2 {
				return st.writeBatch(b)
			}
			switch fail {
			case "second write":
				return errInjected
			case "second write after bytes reach the file":
				_ = st.writeBatch(b)
				return errInjected
			}
			return st.writeBatch(b)
		},
		datasync: func(file File) error {
			if on.Load() && fail == "sealed fsync" {
				return errInjected
			}
			return file.Datasync()
		},
	}
	var dirOn atomic.Bool
	opts := &Options{Sync: mode, SegmentSize: 4 << 10, MaxGroupBytes: 1024, FS: failDirFS{on: &dirOn}}
	l, err := open(dir, opts, f)
	if err != nil {
		t.Fatal(err)
	}
	if _, c, err := l.Append(rec(0)); err != nil || c.Wait() != nil || l.Flush() != nil {
		t.Fatalf("first record: %v", errors.Join(err, c.Wait(), l.Flush()))
	}

	// Four groups in one batch: the roll comes after its second, so the
	// first part holds two groups and the second the other two.
	l.c.mu.Lock()
	on.Store(true)
	dirOn.Store(fail == "directory fsync")
	var commits []*Commit
	for i := 1; i <= 4; i++ {
		_, c, err := l.Append(rec(i))
		if err != nil {
			l.c.mu.Unlock()
			t.Fatal(err)
		}
		commits = append(commits, c)
	}
	l.c.mu.Unlock()
	for i, c := range commits {
		if err := c.Wait(); !errors.Is(err, errInjected) {
			t.Errorf("record %d: Wait = %v, want the injected failure", i+2, err)
		}
	}
	if err := l.Flush(); !errors.Is(err, errInjected) {
		t.Errorf("Flush = %v, want the injected failure", err)
	}
	if w, d := l.WrittenLSN(), l.DurableLSN(); w != 1 || d != 1 {
		t.Errorf("WrittenLSN %d, DurableLSN %d after the batch failed; want 1 and 1", w, d)
	}
	if err := l.Close(); !errors.Is(err, errInjected) {
		t.Errorf("Close = %v, want the injected failure", err)
	}
	on.Store(false)
	dirOn.Store(false)

	n := reopenCheck(t, dir, rec, -1)
	l, err = Open(dir, &Options{SegmentSize: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, c, err := l.Append(rec(n)); err != nil || c.Wait() != nil || l.Flush() != nil {
		t.Fatalf("a record after the reopen: %v", errors.Join(err, c.Wait(), l.Flush()))
	}
	closeOrFail(t, l)
	reopenCheck(t, dir, rec, n+1)
}

// reopenCheck opens dir and checks that it holds records rec(0), rec(1)
// and so on, from LSN 1, want of them (any number when want is -1); it
// returns how many.
func reopenCheck(t *testing.T, dir string, rec func(int) []byte, want int) int {
	t.Helper()
	l, err := Open(dir, &Options{SegmentSize: 4 << 10})
	if err != nil {
		t.Fatalf("Open after the failure: %v", err)
	}
	defer closeOrFail(t, l)
	n := int(l.WrittenLSN())
	if n < 1 || (want >= 0 && n != want) {
		t.Fatalf("%d records after a reopen, want %s", n, map[bool]string{true: "at least 1", false: fmt.Sprint(want)}[want < 0])
	}
	for i := range n {
		b, err := l.Read(LSN(i + 1))
		if err != nil || !bytes.Equal(b, rec(i)) {
			t.Fatalf("Read(%d) after a reopen: %v, or not the record appended", i+1, err)
		}
	}
	return n
}
