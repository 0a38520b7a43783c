package wal

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// forceHold makes the next fsync wait for n callers in Wait, for an hour:
// only the count, a Flush, a Close or a failure ends the hold.
func forceHold(l *Log, n int32) {
	l.c.mu.Lock()
	l.c.gathering.siblings.Store(n)
	l.c.gathering.gatherFor = time.Hour
	l.c.lastSync = time.Now()
	l.c.mu.Unlock()
}

// waiter is a caller blocked in Wait in a goroutine of the test's.
type waiter struct {
	lsn LSN
	c   *Commit
	err chan error
}

func startWait(t *testing.T, l *Log, rec string) *waiter {
	t.Helper()
	lsn, c, err := l.AppendWaiting([]byte(rec), false)
	if err != nil {
		t.Fatal(err)
	}
	w := &waiter{lsn: lsn, c: c, err: make(chan error, 1)}
	go func() { w.err <- c.Wait() }()
	return w
}

// result returns what Wait returned; a Wait that never returns fails the
// test after a minute.
func (w *waiter) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-w.err:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("LSN %d: Wait still blocked", w.lsn)
		return nil
	}
}

// heldPair starts x, written and waiting for a held fsync, and y, which
// arrives during the hold and leaves its group unwritten to the gathering.
func heldPair(t *testing.T, l *Log) (x, y *waiter) {
	t.Helper()
	forceHold(l, 3)
	x = startWait(t, l, "x")
	holdsReach(t, l, 1)
	sleepersReach(t, l, 1)
	y = startWait(t, l, "y")
	sleepersReach(t, l, 2)
	if w := l.WrittenLSN(); w != x.lsn {
		t.Fatalf("WrittenLSN %d, want %d: x written, y left to the gathering", w, x.lsn)
	}
	return x, y
}

// requireDurable checks that every waiter's Wait returned nil with its
// record durable.
func requireDurable(t *testing.T, l *Log, ws ...*waiter) {
	t.Helper()
	for _, w := range ws {
		if err := w.result(t); err != nil {
			t.Fatalf("LSN %d: %v", w.lsn, err)
		}
		if d := l.DurableLSN(); d < w.lsn {
			t.Fatalf("LSN %d: Wait returned with DurableLSN %d", w.lsn, d)
		}
	}
}

// checkNoSleepers checks that no caller is counted in Wait once all returned.
func checkNoSleepers(t *testing.T, l *Log) {
	t.Helper()
	if n := l.c.gathering.sleepers.Load(); n != 0 {
		t.Fatalf("%d sleepers counted after every Wait returned", n)
	}
}

// TestHoldEndedByCloseOrFlush: a Close or a Flush during a hold writes the
// groups left to the gathering and fsyncs them; every caller returns
// durable, and the channels asked for during the hold are closed.
func TestHoldEndedByCloseOrFlush(t *testing.T) {
	for _, end := range []string{"Close", "Flush"} {
		t.Run(end, func(t *testing.T) {
			l, err := open(t.TempDir(), nil, faults{})
			if err != nil {
				t.Fatal(err)
			}
			x, y := heldPair(t, l)
			done, written := y.c.Done(), y.c.Written()
			if end == "Close" {
				err = l.Close()
			} else {
				err = l.Flush()
			}
			if err != nil {
				t.Fatal(err)
			}
			requireDurable(t, l, x, y)
			<-done
			<-written
			checkNoSleepers(t, l)
			if end == "Flush" {
				closeOrFail(t, l)
			}
		})
	}
}

// TestHoldEndedByFailure: a failed write (an urgent one, during the hold)
// or fsync (of the Flush that ends it) poisons the Log, and both the caller
// whose group was written and the one whose group was left to the
// gathering get the error; neither is reported durable.
func TestHoldEndedByFailure(t *testing.T) {
	for _, kind := range []string{"write", "fsync"} {
		t.Run(kind, func(t *testing.T) {
			var on atomic.Bool
			l, err := open(t.TempDir(), nil, failingFaults(&on, kind))
			if err != nil {
				t.Fatal(err)
			}
			x, y := heldPair(t, l)
			written := y.c.Written() // unlike Done, it does not wake the committer
			on.Store(true)
			if kind == "write" {
				_, c, err := l.AppendWaiting([]byte("lease"), true)
				if err == nil {
					err = c.WaitWritten()
				}
				if !errors.Is(err, errInjected) {
					t.Fatalf("WaitWritten = %v, want the injected error", err)
				}
			} else if err := l.Flush(); !errors.Is(err, errInjected) {
				t.Fatalf("Flush = %v, want the injected error", err)
			}
			for _, w := range []*waiter{x, y} {
				if err := w.result(t); !errors.Is(err, errInjected) {
					t.Fatalf("LSN %d: Wait = %v, want the injected error", w.lsn, err)
				}
			}
			<-written
			checkNoSleepers(t, l)
			if d := l.DurableLSN(); d >= x.lsn {
				t.Fatalf("DurableLSN %d covers the failed records from %d", d, x.lsn)
			}
			if err := l.Close(); !errors.Is(err, errInjected) {
				t.Fatalf("Close = %v, want the sticky error", err)
			}
		})
	}
}

// TestHoldEndedByCount: the caller that completes the count writes what
// gathered and fsyncs it, without waiting for the hold's deadline.
func TestHoldEndedByCount(t *testing.T) {
	l, err := open(t.TempDir(), nil, faults{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeOrFail(t, l)
	x, y := heldPair(t, l)
	z := startWait(t, l, "z")
	requireDurable(t, l, x, y, z)
	checkNoSleepers(t, l)
}

// TestHoldEndedByCountWhenAlreadyWritten: the caller that completes the
// count ends the hold also when an urgent caller's write already wrote its
// group (it then has nothing to write, but the fsync must not wait for the
// hold's deadline, here an hour).
func TestHoldEndedByCountWhenAlreadyWritten(t *testing.T) {
	l, err := open(t.TempDir(), nil, faults{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeOrFail(t, l)
	x, y := heldPair(t, l)
	zLSN, zc, err := l.AppendWaiting([]byte("z"), false)
	if err != nil {
		t.Fatal(err)
	}
	_, lease, err := l.AppendWaiting([]byte("lease"), true)
	if err == nil {
		err = lease.WaitWritten() // urgent: writes y's and z's groups too
	}
	if err != nil {
		t.Fatal(err)
	}
	if !zc.isWritten() {
		t.Fatal("z's group not written by the urgent write")
	}
	z := &waiter{lsn: zLSN, c: zc, err: make(chan error, 1)}
	go func() { z.err <- zc.Wait() }()
	requireDurable(t, l, x, y, z)
	checkNoSleepers(t, l)
}
