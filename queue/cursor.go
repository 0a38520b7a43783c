package queue

import (
	"errors"
	"fmt"
	"io"

	"github.com/walq/walq/wal"
)

// The cursor's reader (q.mu.cursor) reads the never-delivered messages in
// LSN order. A dequeuer reads the next one ahead, before it takes q.mu:
// the reader's I/O, the entry's checks, the decode and the copy of the
// payload and id out of the reader's buffer then keep neither producers
// nor settles waiting. Under q.mu it takes what was read ahead, or reads
// there as before.
//
// Locking: q.cur is taken before q.mu, never after it. Reading with the
// cursor's reader needs q.cur; replacing or closing it needs q.cur and
// q.mu (resetCursorLocked, closeCursor). The state decides under q.mu
// alone what is delivered: what was read ahead is only a record of the
// log, checked there against the cursor (takeCursorLocked) as a record
// read under q.mu is.

// cursorMsg is an enqueue record the cursor may deliver, with its payload
// and id copied out of the reader's buffer.
type cursorMsg struct {
	lsn  uint64   // the record's LSN (the message's seq); 0 when none
	size int      // the record's encoded size
	r    record   // decoded; Payload nil (it is m's), ID a string of its own
	m    *Message // new, its Payload a copy of the record's
}

// cursorRead is what one read at the cursor found: the next enqueue
// record that is not delayed (msg) or the reader's error, after records
// it passed over.
type cursorRead struct {
	passed uint64    // 1 + the last LSN passed over as not the cursor's to deliver (another op, or delayed); 0 when none
	msg    cursorMsg // the record found; lsn 0 when none
	err    error     // the read's or the decode's error, wrapped; nil at the end of the written log
}

// empty reports that cr found nothing and passed over nothing: the zero
// cursorRead, or a read that met the end of the written log at once.
func (cr *cursorRead) empty() bool {
	return cr.passed == 0 && cr.msg.lsn == 0 && cr.err == nil
}

// readCursor reads rd on to the next enqueue record at or after from that
// is not delayed and returns it, its payload and id copied out of rd's
// buffer. A record before from is passed over without being decoded or
// noted (the cursor passed it: a copy forward took it). Only the caller
// holding q.cur may call it.
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
		return out
	}
}

// readAhead reads the cursor's next message, if nothing read ahead is
// waiting, for the next look under q.mu to take. q.cur must be held, and
// not q.mu.
func (q *Queue) readAhead() {
	if q.cur.ahead.empty() && q.mu.cursor != nil {
		q.cur.ahead = readCursor(q.mu.cursor, 0)
	}
}

// takeCursorLocked returns the cursor's next message to deliver, reading
// the log from the cursor on if what was read ahead holds none; lsn 0 when
// the written log holds none. It advances st.cursor past the records it
// passes over, as each is found. q.cur and q.mu must be held.
func (q *Queue) takeCursorLocked() (cursorMsg, error) {
	st := q.mu.st
	if q.mu.stale {
		q.resetCursorHeld()
	}
	reset := false
	for {
		cr, ahead := q.cur.ahead, true
		q.cur.ahead = cursorRead{}
		if cr.empty() {
			cr, ahead = readCursor(q.mu.cursor, st.cursor), false
		}
		st.cursor = max(st.cursor, cr.passed)
		switch {
		case cr.err == nil && cr.msg.lsn == 0 && ahead:
			continue // the read ahead met the end: read on, for what was written since
		case cr.err == nil && cr.msg.lsn == 0:
			return cursorMsg{}, nil
		case cr.err == nil && cr.msg.lsn < st.cursor:
			continue // read ahead before a copy forward took it (applyCursorMove)
		case cr.err == nil:
			return cr.msg, nil
		case errors.Is(cr.err, wal.ErrNotFound) && !reset:
			// A compaction cut the log past the reader's position: it
			// cuts only what the cursor no longer needs
			// (cursorNeedLocked). Read on from the cursor, or from the
			// log's start.
			q.resetCursorHeld()
			reset = true
			continue
		}
		return cursorMsg{}, cr.err
	}
}
