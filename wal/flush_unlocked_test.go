package wal

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// heldFsync returns faults whose fsyncs, once armed is closed, signal
// entered and wait for release, then fail with errInjected if fail is set.
// Fsyncs before armed is closed (those of Open) pass at once.
func heldFsync(armed, entered, release chan struct{}, fail bool) faults {
	return faults{datasync: func(f File) error {
		select {
		case <-armed:
		default:
			return f.Datasync()
		}
		select {
		case entered <- struct{}{}: // the first held fsync
		default:
		}
		<-release
		if fail {
			return errInjected
		}
		return f.Datasync()
	}}
}

// heldFlush opens a SyncNever log with held fsyncs, appends n records and
// starts a Flush whose fsync it holds; it returns the log, the Flush's
// outcome and the function that releases the fsync (the test's cleanup
// releases it too, before Close).
func heldFlush(t *testing.T, fail bool, n int) (*Log, <-chan error, func()) {
	t.Helper()
	armed, entered, release := make(chan struct{}), make(chan struct{}, 1), make(chan struct{})
	l, err := open(t.TempDir(), &Options{Sync: SyncNever}, heldFsync(armed, entered, release, fail))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(func() { free(); _ = l.Close() })
	mustAppend(t, l, n)
	close(armed)
	flushed := make(chan error, 1)
	go func() { flushed <- l.Flush() }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("Flush made no fsync")
	}
	return l, flushed, free
}

// appendDuringFsync appends n records while the Flush's fsync is held and
// fails the test unless every Wait returns nil before the fsync ends.
func appendDuringFsync(t *testing.T, l *Log, n int) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		for range n {
			_, c, err := l.Append([]byte("meanwhile"))
			if err == nil {
				err = c.Wait()
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a write during Flush's fsync failed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("writers waited for Flush's fsync under SyncNever")
	}
}

// TestFlushFsyncLetsWritersWrite: under SyncNever a Flush's fsync does not
// hold the committer's mutex, so callers keep writing while it runs; what
// the Flush makes durable is what was written before it, and the records
// written during its fsync are written, not counted durable.
func TestFlushFsyncLetsWritersWrite(t *testing.T) {
	l, flushed, release := heldFlush(t, false, 10)
	appendDuringFsync(t, l, 20)
	if got := l.DurableLSN(); got >= 10 {
		t.Fatalf("DurableLSN = %d while Flush's fsync is held", got)
	}
	release()
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if got := l.DurableLSN(); got < 10 || got > 30 {
		t.Fatalf("DurableLSN after Flush = %d, want 10..30", got)
	}
	if got := l.WrittenLSN(); got != 30 {
		t.Fatalf("WrittenLSN = %d, want 30", got)
	}
	if err := l.Flush(); err != nil { // the records written meanwhile
		t.Fatal(err)
	}
	if got := l.DurableLSN(); got != 30 {
		t.Fatalf("DurableLSN after a second Flush = %d, want 30", got)
	}
}

// TestFlushFsyncFailsWhileWritersWrite: a Flush's fsync that fails while
// callers write poisons the log; no record is counted durable by it, the
// Flush and every later call return the error, and a reopen keeps every
// record whose Wait returned nil.
func TestFlushFsyncFailsWhileWritersWrite(t *testing.T) {
	l, flushed, release := heldFlush(t, true, 10)
	before := l.DurableLSN()
	appendDuringFsync(t, l, 20)
	release()
	if err := <-flushed; !errors.Is(err, errInjected) {
		t.Fatalf("Flush = %v, want the injected error", err)
	}
	if got := l.DurableLSN(); got != before {
		t.Fatalf("DurableLSN = %d after a failed fsync, was %d", got, before)
	}
	select {
	case <-l.Poisoned():
	default:
		t.Fatal("a failed fsync of Flush did not poison the log")
	}
	if _, _, err := l.Append([]byte("later")); !errors.Is(err, errInjected) {
		t.Fatalf("Append after the failed fsync = %v", err)
	}
	if err := l.Flush(); !errors.Is(err, errInjected) {
		t.Fatalf("second Flush = %v", err)
	}
	if got := l.DurableLSN(); got != before {
		t.Fatalf("DurableLSN = %d after a second Flush, was %d", got, before)
	}
}
