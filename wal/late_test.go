package wal

import (
	"sync"
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

// TestAppendLateUnderLoadIsWritten: records of AppendLate appended by
// several goroutines at once, between writes of other callers that take
// some of them (so the committer's wakes switch between at once and the
// timer, back and forth), are all written without anyone waiting for
// them; and records of AppendLate appended just before Close, while the
// timer may be armed, are written by Close, their Commits complete.
func TestAppendLateUnderLoadIsWritten(t *testing.T) {
	for _, mode := range []struct {
		name string
		sync SyncMode
	}{{"SyncInterval", SyncInterval}, {"SyncNever", SyncNever}} {
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := Open(dir, &Options{Sync: mode.sync, SyncInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			appendLateAmid(t, l, 4, 1000)
			last := l.LastLSN()
			awaitLSN(t, "written", l.WrittenLSN, last, int(last)-1)

			// The same again, then Close at once: nobody waited for the last ones.
			appendLateAmid(t, l, 4, 100)
			_, c, err := l.AppendLate([]byte("last"))
			if err != nil {
				t.Fatal(err)
			}
			last = l.LastLSN()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if !c.isDone() || c.Wait() != nil {
				t.Fatalf("the Commit of a record of AppendLate appended before Close: done %v, Wait %v", c.isDone(), c.Wait())
			}
			l, err = Open(dir, &Options{Sync: mode.sync, SyncInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if got := l.LastLSN(); got != last {
				t.Fatalf("reopened after Close: log ends at LSN %d, want %d (the records of AppendLate appended before Close)", got, last)
			}
			if rec, err := l.Read(last); err != nil || string(rec) != "last" {
				t.Fatalf("reopened after Close: LSN %d is %q, %v; want %q", last, rec, err, "last")
			}
		})
	}
}

// appendLateAmid appends n records of AppendLate from each of g
// goroutines; every third one is followed by a record of a caller that
// waits for its write, which takes the records of AppendLate before it.
// Nobody waits for the Commits of AppendLate.
func appendLateAmid(t *testing.T, l *Log, g, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for k := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				if _, _, err := l.AppendLate([]byte("ack")); err != nil {
					t.Error(err)
					return
				}
				if (i+k)%3 != 0 {
					continue
				}
				_, c, err := l.AppendWaiting([]byte("lease"), true)
				if err == nil {
					err = c.WaitWritten()
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
