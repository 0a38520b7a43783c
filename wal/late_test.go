package wal

import (
	"testing"
	"time"
)

// TestAppendLateIsWritten: a record of AppendLate whose caller never
// waits, and that no other caller's write takes, is written by the
// committer on its own, whether it wakes the committer at once (no record
// before it was written by a caller; always under SyncAlways) or arms the
// timer (callers wrote the ones before); and, under SyncAlways, fsynced.
// Nothing here calls Wait, WaitWritten or Done, which would write it or
// wake the committer.
func TestAppendLateIsWritten(t *testing.T) {
	for _, mode := range []struct {
		name string
		sync SyncMode
	}{{"SyncAlways", SyncAlways}, {"SyncInterval", SyncInterval}, {"SyncNever", SyncNever}} {
		for _, deferred := range []bool{false, true} {
			name := mode.name + "/at-once"
			if deferred {
				name = mode.name + "/timer"
			}
			t.Run(name, func(t *testing.T) {
				l, err := Open(t.TempDir(), &Options{Sync: mode.sync, SyncInterval: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				for i := range 3 { // after a pause, and one after the other
					l.c.late.deferred.Store(deferred)
					lsn, c, err := l.AppendLate([]byte("ack"))
					if err != nil {
						t.Fatal(err)
					}
					awaitLSN(t, "written", l.WrittenLSN, lsn, i)
					if mode.sync == SyncAlways {
						awaitLSN(t, "fsynced", l.DurableLSN, lsn, i)
					}
					done := func() LSN { // the Commit is completed just after the LSNs are published
						if c.isDone() {
							return lsn
						}
						return 0
					}
					awaitLSN(t, "done", done, lsn, i)
				}
			})
		}
	}
}

// awaitLSN waits until at(), a WrittenLSN or DurableLSN, reaches lsn, the
// i-th record's, and fails the test if it does not within a minute: the
// record was left unwritten.
func awaitLSN(t *testing.T, what string, at func() LSN, lsn LSN, i int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); at() < lsn; {
		if time.Now().After(deadline) {
			t.Fatalf("record %d (LSN %d) appended with AppendLate and not waited for: never %s (up to LSN %d after a minute)",
				i, lsn, what, at())
		}
		time.Sleep(time.Millisecond)
	}
}
