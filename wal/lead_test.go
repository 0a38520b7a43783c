package wal_test

import (
	"sync"
	"testing"
	"time"

	"github.com/walq/walq/wal"
)

// TestWaitingCallersUnderContention: goroutines append with AppendWaiting,
// which wakes no committer, and wait at once, so every group is written by
// a waiting caller, a leader for itself or for followers. Each Wait or
// WaitWritten returns only once the record is written (and fsynced where
// Wait promises it), and nobody is left waiting for a write that no one
// makes.
func TestWaitingCallersUnderContention(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    wal.Options
		written bool // WaitWritten rather than Wait
	}{
		{"SyncNever/Wait", wal.Options{Sync: wal.SyncNever}, false},
		{"SyncNever/WaitWritten", wal.Options{Sync: wal.SyncNever}, true},
		{"SyncInterval/Wait", wal.Options{Sync: wal.SyncInterval, SyncInterval: time.Millisecond}, false},
		{"SyncAlways/Wait", wal.Options{}, false},
		{"SyncAlways/WaitWritten", wal.Options{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const writers, perWriter = 16, 300
			opts := tc.opts
			opts.SegmentSize = 32 << 10 // several roll-overs
			l := openLog(t, t.TempDir(), &opts)
			defer closeLog(t, l)
			var wg sync.WaitGroup
			for w := range writers {
				spawn(&wg, func() {
					for i := range perWriter {
						if !appendAndWait(t, l, uint64(w*perWriter+i), tc.written, tc.opts.Sync == wal.SyncAlways) {
							return
						}
					}
				})
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("waiting callers still blocked after a minute")
			}
			if w := l.WrittenLSN(); w != writers*perWriter {
				t.Fatalf("WrittenLSN %d, want %d", w, writers*perWriter)
			}
		})
	}
}

// appendAndWait appends one self-checking record with AppendWaiting (lazy
// when only written is waited for), waits for it and checks what the wait
// promised (durable: Wait promises an fsync); it reports success.
func appendAndWait(t *testing.T, l *wal.Log, seed uint64, written, durable bool) bool {
	t.Helper()
	lsn, c, err := l.AppendWaiting(selfChecking(seed), written)
	if err == nil && written {
		err = c.WaitWritten()
	} else if err == nil {
		err = c.Wait()
	}
	if err != nil {
		t.Error(err)
		return false
	}
	if w := l.WrittenLSN(); w < lsn {
		t.Errorf("wait returned for LSN %d with WrittenLSN %d", lsn, w)
		return false
	}
	if !written && durable && l.DurableLSN() < lsn {
		t.Errorf("Wait returned for LSN %d with DurableLSN %d", lsn, l.DurableLSN())
		return false
	}
	return true
}
