package queue

import (
	"fmt"
	"slices"
)

// showLeaseEnds gives a read-only salvaging open (ReadOnly and Salvage)
// the salvage's ends of the leases of a crashed process (after a crash or
// over damage: EndLeases, before anything else changes the replayed
// state), in memory only: each message is ready again, or dead at
// MaxDeliveries with the salvage's reason, and each sorted batch's values
// are back in place, or dead, as the records EndLeases appends make them;
// Recovery.Requeued and DeadOnOpen count them as the salvage's do.
// Nothing is written.
func (q *Queue) showLeaseEnds() error {
	if !endsLeases(q.recovery) {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, end := range q.leaseEndsLocked() {
		if err := q.mu.st.showEnd(end.rec); err != nil {
			return err
		}
		q.recovery.Requeued++
		if end.dead {
			q.recovery.DeadOnOpen++
		}
	}
	return nil
}

// showEnd applies to the state the record rec that ends a lease
// (leaseEndsLocked), as the salvage's append of it would, but for the
// LSN: the state's last LSN stays the log's.
func (s *state) showEnd(rec *record) error {
	if err := s.check(rec); err != nil {
		return fmt.Errorf("%w: salvage preview: %w", ErrCorrupt, err)
	}
	if rec.Op == opBatchReturn {
		s.applyBatch(rec)
		return nil
	}
	e, _ := s.table.Get(rec.Seq)
	s.applyChange(rec, e)
	return nil
}

// showMarks gives a read-only salvaging open (ReadOnly and Salvage) the
// view that the salvage's CopyPast would write of what the replay learned
// of lost leases (salvageMarks), in memory only: a message that a jump
// passed, or that a mark names from the cursor on, becomes a ready entry
// (Undelivered), or a dead one with its reason, or, acked or purged,
// leaves the pending count. Its entry's payload is its enqueue record,
// which the log still holds, where a salvage's entry is a copy of it.
// Nothing is written, and the next writable salvage marks them again.
func (q *Queue) showMarks() error {
	q.mu.Lock()
	lost := q.mu.st.lost
	jumps := slices.Clone(lost.jumps)
	from := q.mu.st.cursor
	q.mu.Unlock()
	for _, j := range jumps {
		if err := q.showCopies(j.from, j.to); err != nil {
			return err
		}
	}
	end := from
	for seq := range lost.gone {
		end = max(end, seq+1)
	}
	if err := q.showCopies(from, end); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.mu.st.lost = salvageMarks{}
	q.resetCursorLocked()
	return nil
}

// showRecount gives a read-only salvaging open of a damaged log (damaged
// entries, or a front the snapshot needed lost: Recovery.LostBefore) the
// count of never-delivered messages that the salvage counts again from
// the log (advanceCursor with recount), in memory only: a replay over
// damage can miscount them (the first lease of a message whose enqueue
// record was lost takes it from the count). showMarks ran first, so every
// enqueue record from the cursor on is a never-delivered message's.
func (q *Queue) showRecount() error {
	if len(q.recovery.Log.Salvaged) == 0 && q.recovery.LostBefore == 0 {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	n, bytes, err := q.countPending(max(q.mu.st.cursor, q.log.FirstLSN()))
	if err != nil {
		return err
	}
	q.mu.st.pending, q.mu.st.pendingBytes = n, bytes
	return nil
}

// showCopies applies showCopy to every never-delivered message from from
// up to to.
func (q *Queue) showCopies(from, to uint64) error {
	for from < to {
		cs, next, err := q.readCandidates(from, to)
		if err != nil {
			return err
		}
		q.mu.Lock()
		for _, c := range cs {
			q.mu.st.showCopy(c)
		}
		q.mu.Unlock()
		from = next
	}
	return nil
}

// showCopy applies to the state what the salvage's copy of candidate c
// would (copyPassed, moveCandidates), with c's enqueue record for the
// copy: nothing when the table holds c (its delivery's lease survived) or
// the cursor passed it outside a jump.
func (s *state) showCopy(c candidate) {
	if _, ok := s.table.Get(c.lsn); ok || (c.lsn < s.cursor && !s.lost.jumped(c.lsn)) {
		return
	}
	rec := &record{Op: opMove, Seq: c.lsn, Flags: flagCursor, ID: c.rec.ID, Enq: c.rec.At, Size: uint32(c.size)}
	if !s.lost.gone.copy(c.lsn, rec) { // acked or purged: the salvage's advance passes it
		s.pending--
		s.pendingBytes -= int64(c.size)
		s.cursor = max(s.cursor, c.lsn+1)
		return
	}
	s.applyCursorMove(c.lsn, rec, c.size)
}
