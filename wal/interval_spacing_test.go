package wal

import (
	"sync"
	"testing"
	"time"
)

// TestSyncIntervalSpacesFsyncs: under SyncInterval a steady writer's
// fsyncs start at least SyncInterval apart. An fsync made on a write
// once the interval had passed left the timer armed by an earlier write,
// and its tick fsynced again a few milliseconds later: one fsync wasted
// per interval, with nothing more to cover.
func TestSyncIntervalSpacesFsyncs(t *testing.T) {
	const interval = 20 * time.Millisecond
	var mu sync.Mutex
	var starts []time.Time
	f := faults{datasync: func(file File) error {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		return file.Datasync()
	}}
	l, err := open(t.TempDir(), &Options{Sync: SyncInterval, SyncInterval: interval, SegmentSize: 64 << 20}, f)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for end := time.Now().Add(40 * interval); time.Now().Before(end); {
		if _, _, err := l.Append([]byte("steady")); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(starts) < 3 {
		t.Fatalf("%d fsyncs in %v of writes, SyncInterval %v", len(starts), 15*interval, interval)
	}
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < interval {
			t.Errorf("fsync %d started %v after the one before, within SyncInterval %v", i, gap, interval)
		}
	}
}
