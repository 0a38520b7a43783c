package queue

import (
	"errors"
	"fmt"

	"github.com/walq/walq/recovery"
)

// Compact takes a snapshot now and removes the log segments that neither
// the snapshot nor any live message needs. Messages that have stayed in
// the queue long enough to hold back more log than the live data itself
// are first copied forward, so that a few old messages cannot pin the
// whole log. The queue compacts by itself as the log grows.
//
// A message or value whose record fails a delivery's checks (its
// checksum, or that it is the record the index names) is never copied
// forward: it stays where it is, and so does the log from it on. The
// compaction then copies only what lies below it, truncates, and returns
// an error wrapping ErrCorrupt that names its LSN (in the background: a
// failure in Stats and the log, retried with backoff). A damaged entry
// between the cursor and where the copies stop (a never-delivered
// message's) is met the same way: nothing whose record lies above it is
// copied, indexed messages included, so a retry copies nothing again.
func (q *Queue) Compact() error {
	if q.opts.ReadOnly {
		return ErrReadOnly
	}
	q.mu.Lock()
	closed := q.mu.closed
	q.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return q.compact()
}

// compactDue reports whether the log has grown enough for a compaction:
// SnapshotBytes since the last snapshot, or a segment since it while the
// log holds more than twice the live bytes plus two segments.
func (q *Queue) compactDue() bool {
	if q.opts.manualCompact {
		return false
	}
	q.mu.Lock()
	since, live := q.mu.sinceSnap, q.mu.st.liveBytes()
	q.mu.Unlock()
	if since >= q.opts.SnapshotBytes {
		return true
	}
	return since >= q.opts.SegmentSize && q.overBound(live)
}

// overBound reports whether the log holds more than twice the live bytes
// plus two segments.
func (q *Queue) overBound(live int64) bool {
	return q.log.Size() > 2*live+2*q.opts.SegmentSize
}

// compact snapshots and truncates; if old messages still pin more log than
// the bound allows, it copies them forward (moveTargetLocked says which)
// and does it once more. One pass runs at a time, whole: a Compact called
// while the housekeeper's pass copies forward waits for it, then does its
// own, so the log is within the bound when it returns (had it only waited
// for the copies, it would find nothing left to move and return before the
// other pass's second snapshot had truncated the log). A pass that starts
// once Close began returns ErrClosed: Close holds compactMu from its
// snapshot until the log is closed, so a pass that took it first ends
// before the log closes, and one that takes it later would find the log
// closed under it.
func (q *Queue) compact() error {
	q.compactMu.Lock()
	defer q.compactMu.Unlock()
	if q.isClosed() {
		return ErrClosed
	}
	if err := q.takeSnapshot(); err != nil {
		return err
	}
	q.mu.Lock()
	live := q.mu.st.liveBytes()
	q.mu.Unlock()
	if !q.overBound(live) {
		return nil
	}
	q.mu.Lock()
	target := q.moveTargetLocked()
	q.mu.Unlock()
	moved, err := q.movePinned(target, false)
	var left *damageLeft
	if moved == 0 || (err != nil && !errors.As(err, &left)) {
		return err
	}
	if serr := q.takeSnapshot(); serr != nil {
		return serr
	}
	return err // the damage left behind, once the copies below it are in the snapshot
}

// snapshot freezes the state, makes the log durable up to it, writes the
// snapshot file and truncates the log front.
func (q *Queue) snapshot() error {
	q.compactMu.Lock()
	defer q.compactMu.Unlock()
	return q.takeSnapshot()
}

// takeSnapshot is snapshot for a caller that holds q.compactMu.
func (q *Queue) takeSnapshot() error {
	q.mu.Lock()
	if st := q.mu.st; st.pending == 0 {
		// The cursor owns nothing: the truncation below may cut past it
		// (cursorNeedLocked), so it passes the end of the log first. A
		// snapshot with the old cursor would claim, once messages are
		// enqueued again, LSNs that the truncation removed.
		st.cursor = max(st.cursor, st.last+1)
	}
	q.expireDedupLocked(q.now()) // what the window forgot by now is kept by this snapshot
	f := q.mu.st.freeze()
	low := q.lowWaterLocked()
	unchanged := f.last == q.mu.snapLSN && !q.mu.forgot
	// f holds every forget so far; one from here on (an enqueue's, while
	// the file is written) makes the next snapshot due.
	q.mu.forgot = false
	since := q.mu.sinceSnap // reset once the snapshot is written, so a failure is retried
	q.mu.Unlock()
	if unchanged {
		q.clearSinceSnap(since)
		return q.log.Err() // nothing to write, but a poisoned log still says so
	}
	if err := q.writeSnapshot(f); err != nil {
		q.mu.Lock()
		q.mu.forgot = true // retried: f's forgets are not kept yet
		q.mu.Unlock()
		return err
	}
	q.mu.Lock()
	q.mu.snapLSN, q.mu.snapAt = f.last, q.opts.Clock.Now()
	q.mu.sinceSnap -= since
	q.mu.Unlock()
	if err := q.log.TruncateFront(min(low, f.last+1)); err != nil {
		return fmt.Errorf("queue: truncate log: %w", err)
	}
	q.compactPoint("truncated")
	return nil
}

// compactPoint calls the crash tests' compaction hook, when set
// (internal/testhook), at the named point.
func (q *Queue) compactPoint(name string) {
	if q.opts.compactStep != nil {
		q.opts.compactStep(name)
	}
}

// writeSnapshot makes the log durable up to f and writes f's file.
func (q *Queue) writeSnapshot(f *frozen) error {
	if err := q.log.Flush(); err != nil {
		return fmt.Errorf("queue: snapshot: %w", err)
	}
	opts := &recovery.WriteOptions{FileMode: q.opts.FileMode, Step: q.opts.snapshotStep, FS: q.opts.FS}
	if _, err := recovery.WriteFunc(q.dir, f.last, f.encodeTo, opts); err != nil {
		return fmt.Errorf("queue: snapshot: %w", err)
	}
	return nil
}

// clearSinceSnap takes the since bytes a snapshot covers off the count of
// bytes written since the last one.
func (q *Queue) clearSinceSnap(since int64) {
	q.mu.Lock()
	q.mu.sinceSnap -= since
	q.mu.Unlock()
}

// lowWaterLocked is the lowest LSN the live messages need: the cursor (or,
// when no never-delivered message is left after it, the next LSN), or the
// payload record of the oldest message the indexes hold.
func (q *Queue) lowWaterLocked() uint64 { return lowWater(q.mu.st) }

// lowWater is lowWaterLocked for a state that is not installed yet.
func lowWater(st *state) uint64 {
	low := cursorNeed(st)
	if loc, ok := st.table.MinLoc(); ok && loc < low {
		low = loc
	}
	if loc, ok := st.sorted.MinLoc(); ok && loc < low {
		low = loc
	}
	return low
}

// cursorNeedLocked is the lowest LSN the cursor region needs: the cursor,
// or past the last record when no never-delivered message is left.
func (q *Queue) cursorNeedLocked() uint64 { return cursorNeed(q.mu.st) }

func cursorNeed(st *state) uint64 {
	if st.pending == 0 {
		return st.last + 1
	}
	return st.cursor
}

// A compaction copies the never-delivered messages from the cursor on only
// while there are at most this many, of at most this many bytes: each copy
// becomes an index entry in memory.
const (
	maxCursorCopy      = 1 << 14
	maxCursorCopyBytes = 16 << 20
)

// moveTargetLocked returns the LSN before which a compaction copies live
// messages forward. The delivered, delayed and dead messages and the sorted
// values are always copied. The never-delivered messages from the cursor on
// are copied too when they are few (maxCursorCopy); when they are many,
// what lies between and after them (chiefly the consumers' own lease and
// ack records during a drain) is freed as the cursor passes it, and copying
// them would write a large backlog again and hold an index entry in memory
// for each copy: the target is then the cursor's segment.
func (q *Queue) moveTargetLocked() uint64 {
	st := q.mu.st
	if st.pending <= maxCursorCopy && st.pendingBytes <= maxCursorCopyBytes {
		return q.segmentStart(st.last)
	}
	return q.segmentStart(q.cursorNeedLocked())
}

// segmentStart returns the first LSN of the segment that holds lsn.
func (q *Queue) segmentStart(lsn uint64) uint64 {
	start := uint64(0)
	for _, s := range q.log.Segments() {
		if s.FirstLSN != 0 && s.FirstLSN <= lsn {
			start = s.FirstLSN
		}
	}
	return start
}
