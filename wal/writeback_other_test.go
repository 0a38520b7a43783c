//go:build !linux

package wal

import "testing"

// TestNoWritebackGoroutine: on a platform without write-back hints a Log
// that does not fsync every write runs no write-back goroutine, whose
// every hint would be a no-op.
func TestNoWritebackGoroutine(t *testing.T) {
	for _, mode := range []SyncMode{SyncNever, SyncInterval} {
		l, err := Open(t.TempDir(), &Options{Sync: mode})
		if err != nil {
			t.Fatal(err)
		}
		running := l.c.hints.jobs != nil
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if running {
			t.Errorf("Sync %v: the write-back goroutine runs", mode)
		}
	}
}
