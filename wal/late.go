package wal

import (
	"sync/atomic"
	"time"
)

// A caller that appends without waiting for its Commit (an asynchronous
// ack) usually has its record written within microseconds by another
// caller's write: the next delivery's lease, whose caller writes every
// group gathered (lead.go). Waking the committer goroutine for each such
// record then costs more than the write it would make: a thread woken on
// the idle processor, which contends for committer.mu with the writing
// caller and finds nothing left to write. So AppendLate wakes the
// committer at once only while such records are found waiting for it.
// While callers' writes take them first, it arms a timer instead, once
// for every record appended until it fires: the committer writes, after
// lateWake at most, whatever nobody wrote meanwhile (one wake-up covers
// them all).
//
// The committer judges which of the two holds each time it wakes for
// such records, at once or at the timer: if the last record that woke it
// or armed the timer is written by then, callers write them, and the
// next one arms the timer; otherwise it wakes the committer at once. A
// record waits lateWake at most, and only while records before it were
// written by callers: the first one after a stream of them, whose lone
// caller writes nothing after it. Wait, WaitWritten and Done still write
// it, or wake the committer, at once.
//
// Under SyncAlways a record of AppendLate wakes the committer at once, as
// Append's does: it needs an fsync, which the committer starts on the
// syncer, while a caller that writes it for its own record's sake (a
// lease, which waits only for its write) would run that fsync itself and
// wait for it.

// lateWake is how long a record of AppendLate may wait for another
// caller's write before the committer writes it.
const lateWake = time.Millisecond

// lateWakes is the committer's state for AppendLate. Its atomics are
// read and written without any lock, by appending callers and the
// committer.
type lateWakes struct {
	timer    *time.Timer   // fires lateWake after it was armed; the committer's goroutine watches it
	armed    atomic.Bool   // the timer runs for records of AppendLate not yet taken by the committer
	deferred atomic.Bool   // callers wrote the last such records before the committer: arm the timer
	lsn      atomic.Uint64 // LSN of the record that last woke the committer or armed the timer; 0 once judged
}

// AppendLate is Append for a caller that does not wait for the Commit
// and whose record a write of another caller's soon usually takes (see
// above): under SyncNever and SyncInterval the committer may write it up
// to lateWake later than Append's would; under SyncAlways it is Append.
// Wait, WaitWritten and Done on the Commit do not wait for that.
func (l *Log) AppendLate(rec []byte) (LSN, *Commit, error) {
	lsn, c, err := l.add(rec, true)
	if err != nil {
		return lsn, c, err
	}
	lw := &l.c.late
	switch {
	case l.opts.Sync == SyncAlways:
		// The record waits for an fsync, which the committer's wake
		// starts on the syncer: a caller's write that took it would run
		// that fsync itself, on a caller that waits only for its write.
		l.wakeCommitter()
	case !lw.deferred.Load():
		lw.lsn.Store(lsn)
		l.wakeCommitter()
	case lw.armed.CompareAndSwap(false, true):
		// Armed only here, and disarmed by the committer before it
		// takes the groups: a record that finds the timer armed is
		// taken by the write that follows its firing.
		lw.lsn.Store(lsn)
		lw.timer.Reset(lateWake)
	}
	return lsn, c, nil
}

// judge decides how the next records of AppendLate wake the committer,
// from whether the record that woke it or armed the timer is written
// already. The committer calls it before it writes.
func (lw *lateWakes) judge(written LSN) {
	if lsn := lw.lsn.Swap(0); lsn != 0 {
		lw.deferred.Store(written >= lsn)
	}
}
