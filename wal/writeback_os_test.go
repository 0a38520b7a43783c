package wal

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestWritebackOSHintTaken: on the real file system the Log's own
// read-only handle on the tail takes the hint (no error), and the Log
// stays healthy across rolls and front truncations.
func TestWritebackOSHintTaken(t *testing.T) {
	var mu sync.Mutex
	var made, unsupported int
	var firstErr error
	hint := func(f File, off, n int64) (bool, error) {
		ok, err := startWriteback(f, off, n)
		mu.Lock()
		defer mu.Unlock()
		made++
		if !ok {
			unsupported++
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return ok, err
	}
	l, err := open(t.TempDir(), &Options{Sync: SyncNever, SegmentSize: 1 << 20}, faults{writeback: hint})
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		if err := writeMiB(l, 1); err != nil {
			t.Fatal(err)
		}
		if err := l.TruncateFront(l.WrittenLSN()); err != nil {
			t.Fatal(err)
		}
	}
	closeOrFail(t, l)
	mu.Lock()
	defer mu.Unlock()
	if made == 0 || firstErr != nil || (runtime.GOOS == "linux" && unsupported != 0) {
		t.Fatalf("%d hints made, %d unsupported, first error %v; want some, none unsupported on linux, no error",
			made, unsupported, firstErr)
	}
}

// TestWritebackNoGoroutineLeak: opening and closing a Log 20 times
// leaves no goroutine behind: when each Close returns, the write-back
// goroutine and the syncer have returned (on one processor, as in
// TestCloseWaitsForGoroutines).
func TestWritebackNoGoroutineLeak(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	awaitNoLogGoroutines(t)
	dir := t.TempDir()
	for range 20 {
		l, err := Open(dir, &Options{Sync: SyncInterval, SyncInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := writeMiB(l, 1); err != nil {
			t.Fatal(err)
		}
		closeOrFail(t, l)
		requireNoLogGoroutines(t, "Close")
	}
}
