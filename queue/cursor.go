package queue

import (
	"errors"
	"fmt"
	"io"

	"github.com/walq/walq/wal"
)

// The cursor's reader (q.rd.cursor) reads the never-delivered messages in
// LSN order. A dequeuer reads some of them ahead, before it takes q.mu,
// into a short FIFO (q.ahead): the reader's I/O, the entry's checks, the
// decode, the Message's allocation and the copy of the payload and id out
// of the reader's buffer then run beside the leases, Enqueues and settles
// that hold q.mu. A lease takes the FIFO's head under q.mu, checked
// against the cursor, and does only the lease's bookkeeping there.
//
// Locking: q.rd, then q.mu, then q.ahead (a leaf: nothing is taken while
// it is held). Reading with the reader needs q.rd; repositioning or
// closing it needs q.rd and q.mu. A holder of q.mu never waits for q.rd:
// it tries it (TryLock), and a look that finds the FIFO empty and q.rd
// taken is not conclusive, so it is made again with q.rd taken first
// (lookLocked). What the FIFO holds is only a record of the log: the
// state decides under q.mu what is delivered (popAheadLocked drops an
// entry the cursor has passed: a copy forward took it), and every
// reposition of the reader empties the FIFO and bumps its generation, so
// a read begun with the old position is not pushed.

// Bounds of the read-ahead FIFO. At least one message is read ahead
// whatever its size.
const (
	aheadMax      = 8         // messages
	aheadMaxBytes = 256 << 10 // payload bytes
)

// errAheadBusy is returned by a look under q.mu alone that found the FIFO
// empty and the reader in use by a read ahead: the look is made again with
// q.rd held (lookLocked). It never reaches a caller.
var errAheadBusy = errors.New("queue: cursor's reader busy")

// cursorMsg is an enqueue record the cursor may deliver, with its payload
// and id copied out of the reader's buffer.
type cursorMsg struct {
	lsn    uint64   // the record's LSN (the message's seq); 0 when none
	size   int      // the record's encoded size
	passed uint64   // 1 + the last LSN passed over before it as not the cursor's to deliver; 0 when none
	r      record   // decoded; Payload nil (it is m's), ID a string of its own
	m      *Message // new, its Payload a copy of the record's
}

// cursorRead is what one read at the cursor found: the next enqueue
// record that is not delayed (msg) or the reader's error, after records
// it passed over.
type cursorRead struct {
	passed uint64    // 1 + the last LSN passed over as not the cursor's to deliver (another op, or delayed); 0 when none
	msg    cursorMsg // the record found; lsn 0 when none
	err    error     // the read's or the decode's error, wrapped; nil at the end of the written log
}

// readCursor reads rd on to the next enqueue record at or after from that
// is not delayed and returns it, its payload and id copied out of rd's
// buffer. A record before from is passed over without being decoded or
// noted (the cursor passed it: a copy forward took it). Only the caller
// holding q.rd may call it.
func readCursor(rd *wal.Reader, from uint64) cursorRead {
	var out cursorRead
	for {
		lsn, b, err := rd.Next()
		if err != nil { // looked into only when set: this runs per record
			if !errors.Is(err, io.EOF) {
				out.err = wrapCorrupt("read at cursor", err)
			}
			return out
		}
		if lsn < from {
			continue
		}
		if peekOp(b) != opEnqueue {
			out.passed = lsn + 1
			continue
		}
		// The ID stays a view until the record is kept: a delayed one
		// skipped costs no string.
		r := &out.msg.r
		id, err := decodeRecordAliasedID(b, r)
		if err != nil {
			out.err = fmt.Errorf("queue: record at LSN %d: %w", lsn, err)
			return out
		}
		if r.Due != 0 {
			// Enqueued with a delay: the table owns it (applyEnqueue), and
			// still does or did until it was acked or purged. Asking the
			// table instead would deliver an acked one a second time.
			out.passed = lsn + 1
			continue
		}
		if id != nil {
			r.ID = string(id)
		}
		out.msg.m = newMessage(r.Payload) // copied before rd reads on
		out.msg.lsn, out.msg.size, r.Payload = lsn, len(b), nil
		out.msg.passed = out.passed
		return out
	}
}

// readAhead reads the cursor's next messages into the FIFO until it is
// full or the written log ends. It waits for q.rd only when the FIFO is
// empty; otherwise a read ahead under way is left to fill it. q.mu must
// not be held.
func (q *Queue) readAhead() {
	q.ahead.Lock()
	n, stale := len(q.ahead.msgs), q.ahead.stale
	q.ahead.Unlock()
	switch {
	case stale || n >= aheadMax:
		return
	case n == 0:
		q.rd.Lock()
	case !q.rd.TryLock():
		return
	}
	defer q.rd.Unlock()
	for range aheadMax {
		q.ahead.Lock()
		gen := q.ahead.gen
		room := !q.ahead.stale && len(q.ahead.msgs) < aheadMax && q.ahead.bytes < aheadMaxBytes
		q.ahead.Unlock()
		if !room || q.rd.cursor == nil {
			return
		}
		if !q.pushAhead(gen, readCursor(q.rd.cursor, 0)) {
			return
		}
	}
}

// pushAhead adds what a read ahead begun at generation gen found to the
// FIFO and reports whether reading on may find more. A read begun before
// a reposition is dropped. An error is not kept: the FIFO is marked stale,
// so the next look reads again under q.rd and q.mu and reports it. q.rd
// must be held.
func (q *Queue) pushAhead(gen uint64, cr cursorRead) bool {
	q.ahead.Lock()
	defer q.ahead.Unlock()
	a := &q.ahead
	switch {
	case a.gen != gen:
		return false
	case cr.err != nil:
		a.stale = true
		return false
	case cr.msg.lsn == 0:
		a.passed = max(a.passed, cr.passed)
		return false
	}
	cr.msg.passed = max(a.passed, cr.msg.passed)
	a.passed = 0
	a.msgs = append(a.msgs, cr.msg)
	a.bytes += len(cr.msg.m.Payload)
	return true
}

// popAheadLocked takes the FIFO's first message that the cursor still
// owns, advancing st.cursor past the records read before it; ok false when
// the FIFO holds none. An entry behind the cursor is dropped: a copy
// forward took it after it was read (applyCursorMove). q.mu must be held.
func (q *Queue) popAheadLocked() (cursorMsg, bool) {
	st := q.mu.st
	q.ahead.Lock()
	defer q.ahead.Unlock()
	a := &q.ahead
	for len(a.msgs) > 0 {
		cm := a.msgs[0]
		copy(a.msgs, a.msgs[1:])
		a.msgs[len(a.msgs)-1] = cursorMsg{} // not kept alive by the slot
		a.msgs = a.msgs[:len(a.msgs)-1]
		a.bytes -= len(cm.m.Payload)
		st.cursor = max(st.cursor, cm.passed)
		if cm.lsn >= st.cursor {
			return cm, true
		}
	}
	st.cursor = max(st.cursor, a.passed)
	a.passed = 0
	return cursorMsg{}, false
}

// takeCursorLocked returns the cursor's next message to deliver: the
// FIFO's head, or else one read from the cursor on; lsn 0 when the written
// log holds none. With held false the caller holds q.mu alone, and the
// answer is errAheadBusy when the FIFO is empty and a read ahead holds
// q.rd; with held true it holds q.rd too. q.mu must be held.
func (q *Queue) takeCursorLocked(held bool) (cursorMsg, error) {
	if cm, ok := q.popAheadLocked(); ok {
		return cm, nil
	}
	if !held {
		if !q.rd.TryLock() {
			return cursorMsg{}, errAheadBusy
		}
		defer q.rd.Unlock()
	}
	return q.readCursorHeld()
}

// readCursorHeld reads the log from the cursor to the next message to
// deliver; lsn 0 when the written log holds none. It advances st.cursor
// past the records it passes over. q.rd and q.mu must be held, and the
// FIFO be empty.
func (q *Queue) readCursorHeld() (cursorMsg, error) {
	st := q.mu.st
	q.ahead.Lock()
	stale := q.ahead.stale
	q.ahead.Unlock()
	if stale {
		q.repositionHeld()
	}
	reset := false
	for {
		cr := readCursor(q.rd.cursor, st.cursor)
		st.cursor = max(st.cursor, cr.passed)
		switch {
		case cr.err == nil:
			return cr.msg, nil
		case errors.Is(cr.err, wal.ErrNotFound) && !reset:
			// A compaction cut the log past the reader's position: it
			// cuts only what the cursor no longer needs
			// (cursorNeedLocked). Read on from the cursor, or from the
			// log's start.
			q.repositionHeld()
			reset = true
			continue
		}
		return cursorMsg{}, cr.err
	}
}

// resetCursorLocked points the cursor's reader at the cursor. The log may
// start after the cursor: compaction cuts past it when nothing after it is
// live, so reading starts where the log does. q.mu must be held. The FIFO
// is emptied at once; when a read ahead holds q.rd, the reader itself is
// repositioned by the next read under q.rd and q.mu (readCursorHeld), as
// q.rd is never waited for under q.mu.
func (q *Queue) resetCursorLocked() {
	if q.rd.TryLock() {
		q.repositionHeld()
		q.rd.Unlock()
		return
	}
	q.ahead.Lock()
	q.dropAheadLocked()
	q.ahead.stale = true
	q.ahead.Unlock()
}

// repositionHeld is resetCursorLocked with q.rd held too.
func (q *Queue) repositionHeld() {
	if q.rd.cursor != nil {
		q.rd.cursor.Close()
	}
	q.rd.cursor = q.log.NewReader(max(q.mu.st.cursor, q.log.FirstLSN()))
	q.ahead.Lock()
	q.dropAheadLocked()
	q.ahead.stale = false
	q.ahead.Unlock()
}

// dropAheadLocked empties the FIFO and starts a new generation, so that a
// read ahead under way is not pushed. q.ahead must be held.
func (q *Queue) dropAheadLocked() {
	a := &q.ahead
	clear(a.msgs)
	a.msgs, a.bytes, a.passed = a.msgs[:0], 0, 0
	a.gen++
}

// closeCursor releases the cursor's reader and the segment file it pins,
// and what was read ahead; Close calls it once the queue is closed, and
// a read ahead that starts later finds no reader.
func (q *Queue) closeCursor() {
	q.rd.Lock()
	defer q.rd.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.rd.cursor != nil {
		q.rd.cursor.Close()
		q.rd.cursor = nil
	}
	q.ahead.Lock()
	q.dropAheadLocked()
	q.ahead.Unlock()
}
