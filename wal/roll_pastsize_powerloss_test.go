package wal_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/wal"
)

// TestPowerLossRollingTailPastSegmentSize: a log reopened with a
// SegmentSize below its tail's size rolls at its first write, before the
// write's first entry (tidwall/wal's rule), into a new segment; when that
// write's first group fills the new segment, it rolls again in the same
// write. The new segment's name must be durable before the one after it
// can be: a power loss that kept the second name without the first would
// leave an empty tail that is not the segment after the old tail, a log
// Open refuses though no record lost was reported durable. At every
// durable operation of the workload (one group of three records that
// fills a 4 KiB segment, one more record, a Flush), under each sync mode,
// every state a power loss can leave opens, plainly, with every record
// reported durable, in order (a state with a hole may be refused, as in
// TestPowerLossInGroupSpanningRoll).
func TestPowerLossRollingTailPastSegmentSize(t *testing.T) {
	for _, mode := range []struct {
		name     string
		sync     wal.SyncMode
		interval time.Duration
	}{
		{"always", wal.SyncAlways, 0},
		{"interval", wal.SyncInterval, time.Nanosecond},
		{"never", wal.SyncNever, 0},
	} {
		t.Run(mode.name, func(t *testing.T) {
			opts := wal.Options{Sync: mode.sync, SyncInterval: mode.interval, SegmentSize: 4 << 10, Locked: true}
			powerLossRollingPastSize(t, opts)
		})
	}
}

func powerLossRollingPastSize(t *testing.T, opts wal.Options) {
	const (
		prefill = 3 // records in the tail before the reopen: 4.5 KiB
		records = prefill + 4
	)
	states := raceScaled(40, 4) // at each durable operation, 10 under -race
	for crashAt := 1; ; crashAt++ {
		root := t.TempDir()
		dir := filepath.Join(root, "log")
		prefillLog(t, dir, prefill)
		cfs, err := crashfs.New(root, crashAt)
		if err != nil {
			t.Fatal(err)
		}
		o := opts
		o.FS = cfs
		durable := prefill + rollPastSizeWorkload(dir, &o, prefill)
		if !cfs.Crashed() {
			if durable != records {
				t.Fatalf("no crash, and %d records durable", durable)
			}
			t.Logf("%d durable operations, %d states", crashAt-1, (crashAt-1)*states)
			return
		}
		if err := cfs.Image(); err != nil {
			t.Fatal(err)
		}
		for s := range states {
			checkZeroState(t, cfs, crashAt, s, opts.SegmentSize, durable)
		}
	}
}

// rollPastSizeWorkload opens the log in dir, appends records first to
// first+2 as one group, then record first+3, flushes and closes the log.
// It returns how many of the four were reported durable, from the first.
func rollPastSizeWorkload(dir string, opts *wal.Options, first int) int {
	l, err := wal.Open(dir, opts)
	if err != nil {
		return 0
	}
	defer l.Close()
	_, c, err := l.AppendAll([][]byte{zeroRecord(first), zeroRecord(first + 1), zeroRecord(first + 2)}, true)
	if err != nil {
		return 0
	}
	durable := 0
	if c.Wait() == nil && opts.Sync == wal.SyncAlways {
		durable = 3
	}
	if _, _, err := l.Append(zeroRecord(first + 3)); err != nil {
		return durable
	}
	if l.Flush() == nil {
		durable = 4
	}
	return durable
}

// prefillLog writes records zeroRecord(0) to zeroRecord(n-1) into a log
// in dir whose SegmentSize is 64 KiB, and closes it.
func prefillLog(t *testing.T, dir string, n int) {
	t.Helper()
	l, err := wal.Open(dir, &wal.Options{SegmentSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, _, err := l.Append(zeroRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
}
