package queue

import (
	"errors"
	"math"
	"sync"

	"github.com/walq/walq/recovery"
)

// The queue applies a record to its state when it appends it, before the
// log writes it: that fixes the order of the records, and a call that
// fails on a healthy log changes nothing. Once a failed write or fsync
// has poisoned the log, the state still holds what the calls that failed
// appended: an enqueue whose write failed is counted there, though no
// disk holds it and no reopen delivers it. So Stats of a poisoned queue
// reports the log as written instead: the newest snapshot and every
// record a reader of the log finds after it (what was written, synced or
// not), replayed as an open replays them. Nothing is written after the
// poison, so the replay reaches the end once and then follows only a
// write that was under way when the poison came. A read back that meets
// damage (a segment damaged since it was written) would meet it again at
// the same place, so it is not tried again: every later Stats reports the
// calls' counts with the failure (Stats.CountsErr), at the cost of no
// further read. A read error may pass (EIO once, too many open files), so
// it is tried again at the next Stats, readBackTries reads in all.

// written is the state of the log as written, read back for Stats once
// the log is poisoned. Its mutex guards its fields and is taken without
// q.mu (the replay reads the log).
type written struct {
	mu    sync.Mutex
	st    *state // nil until the first read back, and after one failed
	next  uint64 // the LSN the next read back replays from
	final bool   // Close read it back before it closed the log: read back no more
	err   error  // the read back failed for good: it is not tried again
	tries int    // read backs that failed
}

// readBackTries is how many read backs that fail with a read error, not
// damage, Stats makes before it keeps the failure.
const readBackTries = 3

// readBackLocked brings the state of the log as written up to the end of
// what the log holds and returns it, or the error of the read back that
// failed, the first time or before. q.written.mu must be held.
func (q *Queue) readBackLocked() (*state, error) {
	w := &q.written
	if w.err != nil {
		return nil, w.err
	}
	if w.final && w.st != nil {
		return w.st, nil
	}
	if w.st == nil {
		st, snapLSN, err := loadSnapshot(q.dir, &q.opts)
		if err != nil {
			return nil, q.readBackFailedLocked(err)
		}
		if !st.dedupWindow { // as Install forgets them
			st.dedup.Expire(math.MaxInt64)
		}
		w.st, w.next = st, snapLSN+1
	}
	_, err := recovery.Replay(q.log, max(w.next, q.log.FirstLSN()), func(lsn uint64, b []byte) error {
		err := w.st.Apply(lsn, b)
		if err != nil && q.opts.Salvage { // as a salvaging open skips it
			w.st.Skip(lsn)
			err = nil
		}
		if err == nil {
			w.next = lsn + 1
		}
		return err
	})
	if err != nil {
		return nil, q.readBackFailedLocked(wrapCorrupt("read back the poisoned log", err))
	}
	return w.st, nil
}

// keepWritten reads the log as written back one last time before Close
// closes it, so that Stats after Close reports it too. It is called only
// once the log is poisoned.
func (q *Queue) keepWritten() {
	q.written.mu.Lock()
	known := q.written.err
	_, err := q.readBackLocked()
	q.written.final = true
	if err != nil { // the log closes: no later read can do better
		q.written.err = err
	}
	q.written.mu.Unlock()
	q.readBackFailed(known, err)
}

// readBackFailedLocked drops the partial state and returns err, the
// failure of the read back; it keeps err, so that the read is not tried
// again, when it names damage or is the last of readBackTries failures.
// q.written.mu must be held.
func (q *Queue) readBackFailedLocked(err error) error {
	w := &q.written
	w.st = nil
	if w.tries++; errors.Is(err, ErrCorrupt) || w.tries >= readBackTries {
		w.err = err
	}
	return err
}

// readBackFailed logs err, the outcome of a read back, when it is a
// failure that known, the one kept before it, was not: once. It is
// called without q.written.mu, as the logger may call Stats.
func (q *Queue) readBackFailed(known, err error) {
	if err == nil || known != nil {
		return
	}
	q.logger().Error("queue: stats of the poisoned log count the calls that failed too: it could not be read back",
		"dir", q.dir, "err", err)
}

// view calls fn with the state that Browse, Peek, DeadLetters, DeadValues
// and Keys show, under the lock that guards it: the queue's own, or, once
// the log is poisoned, the log as written, as Stats counts it, so that a
// view never shows a change whose write failed. When that read back
// fails, fn gets the queue's own state (the calls' changes, the failed
// ones included), as Stats then counts; Stats.CountsErr says why. On a
// closed queue view returns ErrClosed and calls nothing.
func (q *Queue) view(fn func(st *state)) error {
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	if q.log == nil || q.log.Err() == nil || q.opts.ReadOnly {
		fn(q.mu.st)
		q.mu.Unlock()
		return nil
	}
	q.mu.Unlock()
	q.written.mu.Lock()
	known := q.written.err
	st, err := q.readBackLocked()
	if err == nil {
		fn(st)
		q.written.mu.Unlock()
		return nil
	}
	q.written.mu.Unlock()
	q.readBackFailed(known, err)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return ErrClosed
	}
	fn(q.mu.st)
	return nil
}
