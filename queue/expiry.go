package queue

import (
	"time"

	"github.com/walq/walq/index"
	"github.com/walq/walq/wal"
)

// housekeep is the queue's background goroutine. It owns four jobs:
// ending leases whose deadline passed (unless ManualRequeue), compacting
// the log when it has grown, waking the blocked calls whose due time
// passed by the clock (wakeSleepers), and logging the dead-letterings
// that deliveries and pulls made on their way once durable
// (logPendingDead). It sleeps until the next lease
// deadline or due time (reading the clock again at least every
// clockRecheck) or a kick;
// Close stops it and waits for it.
func (q *Queue) housekeep() {
	defer q.wg.Done()
	q.hkID.Store(goroutineID())
	for {
		// Failures are retried with backoff, kept in Stats and logged
		// (events.go).
		q.checkWriteError()
		q.logPendingDead()
		q.requeueInBackground()
		q.compactInBackground()
		var timer <-chan time.Time
		d := q.nextWake()
		if s := q.wakeSleepers(); s >= 0 && (d < 0 || s < d) {
			d = s
		}
		if d >= 0 {
			timer = recheckAfter(q.opts.Clock, d)
		}
		select {
		case <-q.stop:
			return
		case <-q.kick:
		case <-timer:
		}
	}
}

// untilDeadline returns how long until the earliest lease deadline, or -1
// when nothing is leased.
func (q *Queue) untilDeadline() time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	due, ok := q.mu.st.table.NextDeadline()
	if bdue, bok := q.mu.st.sorted.NextDeadline(); bok && (!ok || bdue < due) {
		due, ok = bdue, true
	}
	if !ok || q.opts.ManualRequeue {
		q.mu.armed = 0
		return -1
	}
	q.mu.armed = due
	return max(0, time.Duration(due-q.now()))
}

// RequeueExpired ends every lease whose deadline has passed: its message is
// ready again (a sorted queue's batch: its values back in place), or dead
// once it has had MaxDeliveries. It returns how many leases it ended,
// once the records that end them are as durable as the sync mode promises
// of a call that returned (SyncAlways: fsynced). The queue does this by
// itself unless Options.ManualRequeue is set.
//
// It ends them 1,024 at a time, and wakes the consumers asleep in
// Dequeue, DequeueBatch or Pull as soon as a chunk's records are that
// durable: a message a chunk made ready is delivered then, while the
// next chunks are written, not once the last one is.
func (q *Queue) RequeueExpired() (int, error) {
	n := 0
	for {
		done, c, err := q.requeueSome(requeueChunk)
		n += done
		if err == nil {
			err = wait(c)
		}
		if done > 0 {
			q.signal()
		}
		if err != nil || done < requeueChunk {
			return n, err
		}
	}
}

// requeueChunk is how many leases RequeueExpired ends under one hold of
// q.mu.
const requeueChunk = 1024

// requeueSome ends up to max expired leases and returns how many, with the
// commit of the last record it appended (nil when none).
func (q *Queue) requeueSome(max int) (int, *wal.Commit, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return 0, nil, ErrClosed
	}
	if err := q.poisonErr("requeue"); err != nil {
		return 0, nil, err // not (0, nil): a healthy "no lease ran out"
	}
	now := q.now()
	expired := q.mu.st.table.Expired(now, max)
	var last *wal.Commit
	for i, e := range expired {
		c, err := q.appendLocked(q.endLease(e, "ack timeout"), nil)
		if err != nil {
			return i, nil, err
		}
		last = c
	}
	n, c, err := q.expireBatchesLocked(now, max-len(expired))
	if c != nil {
		last = c
	}
	return len(expired) + n, last, err
}

// noteLeaseLocked wakes the housekeeper when a lease deadline is earlier
// than the one it sleeps until.
func (q *Queue) noteLeaseLocked(deadline int64) {
	if q.mu.armed == 0 || deadline < q.mu.armed {
		q.mu.armed = deadline
		q.wakeHousekeeper()
	}
}

// leasedEntries returns every leased entry.
func leasedEntries(t *index.Table) []index.Entry {
	var out []index.Entry
	t.Leased(func(e index.Entry) bool {
		out = append(out, e)
		return true
	})
	return out
}
