package wal

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
)

var errInjected = errors.New("injected disk failure")

// failingFaults returns faults whose write or fsync fails while *on is set.
// afterWrite lets the batch reach the file before the write "fails".
func failingFaults(on *atomic.Bool, kind string) faults {
	var f faults
	switch kind {
	case "write":
		f.writeBatch = func(st store, b *storeBatch) error {
			if on.Load() {
				return errInjected
			}
			return st.writeBatch(b)
		}
	case "write after bytes reach the file":
		f.writeBatch = func(st store, b *storeBatch) error {
			err := st.writeBatch(b)
			if on.Load() {
				return errInjected
			}
			return err
		}
	case "fsync":
		f.datasync = func(file File) error {
			if on.Load() {
				return errInjected
			}
			return file.Sync()
		}
	}
	return f
}

func TestPoisoning(t *testing.T) {
	for _, kind := range []string{"write", "write after bytes reach the file", "fsync"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			var on atomic.Bool
			opts := &Options{SegmentSize: 4096}
			l, err := open(dir, opts, failingFaults(&on, kind))
			if err != nil {
				t.Fatal(err)
			}
			mustAppend(t, l, 20)
			select {
			case <-l.Poisoned():
				t.Fatal("Poisoned is closed on a healthy Log")
			default:
			}
			on.Store(true)
			_, c, err := l.Append([]byte("doomed"))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Wait(); !errors.Is(err, errInjected) {
				t.Fatalf("Wait = %v, want the injected error", err)
			}
			select {
			case <-l.Poisoned(): // closed before the failed commit completes
			default:
				t.Fatal("Poisoned is not closed on a poisoned Log")
			}
			on.Store(false) // the disk "recovers": the Log must not trust it
			if err := l.Err(); !errors.Is(err, errInjected) {
				t.Fatalf("Err = %v", err)
			}
			if _, _, err := l.Append([]byte("later")); !errors.Is(err, errInjected) {
				t.Fatalf("Append after poisoning = %v", err)
			}
			if err := l.Flush(); !errors.Is(err, errInjected) {
				t.Fatalf("Flush after poisoning = %v", err)
			}
			if err := l.TruncateFront(5); !errors.Is(err, errInjected) {
				t.Fatalf("TruncateFront after poisoning = %v", err)
			}
			if got, err := l.Read(20); err != nil || string(got) != "r19" {
				t.Fatalf("Read of a record written before the failure = %q, %v", got, err)
			}
			if err := l.Close(); !errors.Is(err, errInjected) {
				t.Fatalf("Close = %v, want the sticky error", err)
			}
			checkReopen(t, dir, opts, 20)
		})
	}
}

// TestPoisonFailsQueuedCommits checks that groups queued behind the failed
// one fail too, and that none is reported durable.
func TestPoisonFailsQueuedCommits(t *testing.T) {
	dir := t.TempDir()
	var on atomic.Bool
	on.Store(true)
	l, err := open(dir, &Options{}, failingFaults(&on, "fsync"))
	if err != nil {
		t.Fatal(err)
	}
	var commits []*Commit
	for i := range 100 {
		_, c, err := l.Append([]byte(fmt.Sprint(i)))
		if err != nil {
			break // poisoned already
		}
		commits = append(commits, c)
	}
	for i, c := range commits {
		if err := c.Wait(); !errors.Is(err, errInjected) {
			t.Fatalf("commit %d: Wait = %v", i, err)
		}
	}
	if d := l.DurableLSN(); d != 0 {
		t.Fatalf("DurableLSN = %d after failed fsyncs", d)
	}
	_ = l.Close()
}

func mustAppend(t *testing.T, l *Log, n int) {
	t.Helper()
	var c *Commit
	for i := range n {
		var err error
		if _, c, err = l.Append([]byte(fmt.Sprintf("r%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
}

// checkReopen opens dir again: it must hold at least the n records whose
// Wait succeeded, contiguous, and accept new ones.
func checkReopen(t *testing.T, dir string, opts *Options, n int) {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer l.Close()
	if l.WrittenLSN() < LSN(n) {
		t.Fatalf("reopen: WrittenLSN %d, want >= %d", l.WrittenLSN(), n)
	}
	for lsn := LSN(1); lsn <= LSN(n); lsn++ {
		if got, err := l.Read(lsn); err != nil || string(got) != fmt.Sprintf("r%d", lsn-1) {
			t.Fatalf("reopen: Read(%d) = %q, %v", lsn, got, err)
		}
	}
	if _, err := l.Verify(); err != nil {
		t.Fatalf("reopen: Verify: %v", err)
	}
	if _, c, err := l.Append([]byte("after")); err != nil || c.Wait() != nil {
		t.Fatalf("reopen: Append: %v", err)
	}
}

// TestPoisonDuringWrite: an fsync that fails on another goroutine while
// the committer writes groups it took before the failure poisons the Log
// for them too: a lazy record's Wait, which would return once written,
// returns the failure, as every Wait after it must.
func TestPoisonDuringWrite(t *testing.T) {
	var l *Log
	var armed atomic.Bool
	f := faults{writeBatch: func(st store, b *storeBatch) error {
		if armed.CompareAndSwap(true, false) {
			l.poison(errInjected) // as the syncer does when an fsync fails
		}
		return st.writeBatch(b)
	}}
	l, err := open(t.TempDir(), &Options{}, f)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	mustAppend(t, l, 3)
	armed.Store(true)
	_, c, err := l.AppendLazy([]byte("lazy"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); !errors.Is(err, errInjected) {
		t.Fatalf("Wait of a lazy record written as the Log was poisoned = %v, want the failure", err)
	}
	if _, _, err := l.Append([]byte("after")); !errors.Is(err, errInjected) {
		t.Fatalf("Append after the failure = %v", err)
	}
}
