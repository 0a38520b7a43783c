package wal_test

import (
	"testing"

	"github.com/walq/walq/wal"
)

// TestZerosThatDoNotFitAreNotRetriedOnTheSameTail: once a write of zeros
// ahead of the tail found the disk full, that tail appends alone until it
// rolls: the next fsyncs write no zeros that would take, each time, all
// the space left (a compaction's snapshot or another program writing
// meanwhile would find the disk full) only to be cut back. The next tail
// tries again, once.
func TestZerosThatDoNotFitAreNotRetriedOnTheSameTail(t *testing.T) {
	for _, c := range []struct {
		name    string
		segment int64
	}{
		{"one tail", 0},
		{"rolls", 64 << 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			fs := &fullZerosFS{}
			l := openLog(t, dir, &wal.Options{FS: fs, Sync: wal.SyncAlways, SegmentSize: c.segment})
			for i := range 300 { // each its own fsync
				_, cm, err := l.Append(zeroRecord(i))
				if err == nil {
					err = cm.Wait()
				}
				if err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
			}
			closeLog(t, l)
			segs := len(segmentFiles(t, dir))
			if got := int(fs.failed.Load()); got == 0 || got > segs {
				t.Fatalf("%d writes of zeros refused over %d segments, want 1 to %d: a tail that found the disk full is extended again at every fsync", got, segs, segs)
			}
			if c.segment != 0 && segs < 3 {
				t.Fatalf("%d segments: the case does not roll", segs)
			}
		})
	}
}
