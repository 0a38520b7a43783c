package wal

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestWitnessIntervalFsynced: under SyncInterval the witness written after
// a tick's fsync is fsynced by the next tick, which it arms, so an idle
// log's records are named on the disk one interval later, not only when
// the kernel writes the page back.
func TestWitnessIntervalFsynced(t *testing.T) {
	var syncs atomic.Int32
	l, err := open(t.TempDir(), &Options{Sync: SyncInterval, SyncInterval: 20 * time.Millisecond},
		faults{datasync: func(f File) error { syncs.Add(1); return f.Datasync() }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, c, err := l.Append([]byte("record"))
	if err == nil {
		err = c.Wait()
	}
	if err != nil {
		t.Fatal(err)
	}
	until := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after 10 s: %s (%d fsyncs)", what, syncs.Load())
			}
		}
	}
	until("no witness written", func() bool { return l.Segments()[0].Bytes > frameSize(headerSize2+recordSize(6)) })
	n := syncs.Load() // the record's fsync, and maybe the witness's already
	until("the witness was not fsynced", func() bool {
		l.c.mu.Lock()
		defer l.c.mu.Unlock()
		return !l.c.dirty
	})
	if syncs.Load() < 2 {
		t.Fatalf("%d fsyncs (%d when the witness was written), want the record's and the witness's", syncs.Load(), n)
	}
}
