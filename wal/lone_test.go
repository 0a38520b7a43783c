package wal

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestLoneCallerWritesItself: a caller alone that appends with
// AppendWaiting and waits (the queue's path) makes its write, and its
// fsync under SyncAlways, on its own goroutine: it never waits for the
// committer's goroutine or the syncer. The disk operations look at the
// goroutine that makes them.
func TestLoneCallerWritesItself(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		lazy bool
	}{
		{"SyncNever/Wait", Options{Sync: SyncNever}, false},
		{"SyncNever/WaitWritten", Options{Sync: SyncNever}, true},
		{"SyncInterval/Wait", Options{Sync: SyncInterval, SyncInterval: time.Hour}, false},
		{"SyncAlways/Wait", Options{}, false},
		{"SyncAlways/WaitWritten", Options{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var elsewhere atomic.Value // string: the first stack of a disk operation off the caller's goroutine
			check := func() {
				if s := stack(); !strings.Contains(s, "wal.loneStep(") && elsewhere.Load() == nil {
					elsewhere.Store(s)
				}
			}
			f := faults{
				writeBatch: func(st store, b *storeBatch) error {
					if !b.witness { // the committer's own, after the caller paused (witness.go): no record of the caller's
						check()
					}
					return st.writeBatch(b)
				},
				datasync: func(f File) error { check(); return f.Datasync() },
			}
			opts := tc.opts
			opts.SegmentSize = 16 << 10 // rolls too
			l, err := open(t.TempDir(), &opts, f)
			if err != nil {
				t.Fatal(err)
			}
			rec := make([]byte, 100)
			for range 2000 {
				lsn, err := loneStep(l, rec, tc.lazy)
				if err != nil {
					t.Fatal(err)
				}
				if l.WrittenLSN() < lsn {
					t.Fatalf("wait returned for LSN %d with WrittenLSN %d", lsn, l.WrittenLSN())
				}
			}
			if s := elsewhere.Load(); s != nil {
				t.Fatalf("a lone caller's disk operation ran on another goroutine:\n%s", s)
			}
			closeOrFail(t, l) // Close fsyncs on the committer's goroutine: after the check
		})
	}
}

// loneStep appends rec with AppendWaiting and waits for it (WaitWritten
// when lazy), in a frame of its own for the stack check.
//
//go:noinline
func loneStep(l *Log, rec []byte, lazy bool) (LSN, error) {
	lsn, c, err := l.AppendWaiting(rec, lazy)
	if err == nil && lazy {
		err = c.WaitWritten()
	} else if err == nil {
		err = c.Wait()
	}
	return lsn, err
}

// stack returns the calling goroutine's stack.
func stack() string {
	buf := make([]byte, 16<<10)
	return string(buf[:runtime.Stack(buf, false)])
}
