package wal

import (
	"errors"
	"os"
	"sync/atomic"
	"testing"
)

// A roll whose fsync fails poisons the log and leaves no segment open:
// Close releases every file the log opened, the segments the failed roll
// opened included.
func TestFailedRollLeavesNoFileOpen(t *testing.T) {
	before := countFDs(t)
	var on atomic.Bool
	l, err := open(t.TempDir(), &Options{SegmentSize: 4096, Sync: SyncNever}, failingFaults(&on, "fsync"))
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, 5)
	on.Store(true) // without an fsync per write, the first fsync is the roll's
	var failed error
	for i := 0; i < 1000 && failed == nil; i++ {
		_, c, err := l.Append(make([]byte, 200))
		if err == nil {
			err = c.Wait()
		}
		failed = err
	}
	if !errors.Is(failed, errInjected) {
		t.Fatalf("appends past a segment's end = %v, want the roll's injected fsync failure", failed)
	}
	if err := l.Close(); !errors.Is(err, errInjected) {
		t.Fatalf("Close = %v, want the sticky error", err)
	}
	if after := countFDs(t); after != before {
		t.Fatalf("%d file descriptors open before Open, %d after Close", before, after)
	}
}

// countFDs counts the process's open file descriptors.
func countFDs(t *testing.T) int {
	t.Helper()
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(des)
}
