package queue

import (
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
// write that was under way when the poison came.

// written is the state of the log as written, read back for Stats once
// the log is poisoned. Its mutex guards its fields and is taken without
// q.mu (the replay reads the log).
type written struct {
	mu     sync.Mutex
	st     *state // nil until the first read back, or after one failed
	next   uint64 // the LSN the next read back replays from
	final  bool   // Close read it back before it closed the log: read back no more
	logged bool   // a failed read back was logged
}

// readBackLocked brings the state of the log as written up to the end of
// what the log holds and returns it. q.written.mu must be held.
func (q *Queue) readBackLocked() (*state, error) {
	w := &q.written
	if w.final && w.st != nil {
		return w.st, nil
	}
	if w.st == nil {
		st, snapLSN, err := loadSnapshot(q.dir, &q.opts)
		if err != nil {
			return nil, err
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
		w.st = nil // start over next time rather than build on a partial replay
		return nil, wrapCorrupt("read back the poisoned log", err)
	}
	return w.st, nil
}

// keepWritten reads the log as written back one last time before Close
// closes it, so that Stats after Close reports it too. It is called only
// once the log is poisoned.
func (q *Queue) keepWritten() {
	q.written.mu.Lock()
	defer q.written.mu.Unlock()
	if _, err := q.readBackLocked(); err != nil {
		q.readBackFailedLocked(err)
	}
	q.written.final = true
}

// readBackFailedLocked logs, once, that the log as written could not be
// read back: Stats then reports the state as the calls left it, the
// failed ones included. q.written.mu must be held.
func (q *Queue) readBackFailedLocked(err error) {
	if q.written.logged {
		return
	}
	q.written.logged = true
	q.logger().Error("queue: stats of the poisoned log count the calls that failed too: it could not be read back",
		"dir", q.dir, "err", err)
}
