package queue

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/walq/walq/index"
	"github.com/walq/walq/wal"
)

// moveChunk is how many payload bytes of never-delivered messages a move
// reads before it takes the lock to append their copies, and how many
// bytes of copies it appends before it waits for them to be written.
const moveChunk = 4 << 20

// pacer makes a move wait, every moveChunk bytes it appended, until they
// are written, so that copies never pile up in memory faster than the log
// takes them.
type pacer struct {
	bytes int
	last  *wal.Commit
}

// add notes a copy of n bytes appended with commit c.
func (p *pacer) add(c *wal.Commit, n int) error {
	p.last, p.bytes = c, p.bytes+n
	if p.bytes < moveChunk {
		return nil
	}
	p.bytes = 0
	return waitWritten(p.last)
}

// movePinned copies forward every live message whose record lies before
// target, so that the segments before target hold nothing live: the
// indexed messages (leased, ready again, delayed, dead, sorted values,
// pending, dead or in leased batches; a delivery of a leased one follows
// the copy) and the
// never-delivered messages between the cursor and target, after which the
// cursor advances to target. A message whose record a salvaging open could
// not read is dropped, and said so in the log. With recount, the number of
// never-delivered messages is counted again from the log (after a salvage
// it may be off). It returns how many messages it moved or dropped.
//
// An indexed record that is damaged is never copied (readMovable). Without
// recount (a compaction), the lowest one, or the lowest entry between the
// cursor and target that does not read (cursorDamage), whichever comes
// first, stops the move there: what lies
// above it is not copied, since the damaged record keeps that part of the
// log anyway, and movePinned returns a *damageLeft error (ErrCorrupt)
// once the copies below it are written. With recount (a salvaging open),
// a damaged record is left where it is and the move goes on to target.
func (q *Queue) movePinned(target uint64, recount bool) (int, error) {
	q.moveMu.Lock()
	defer q.moveMu.Unlock()
	if q.copying != nil {
		q.copying()
	}
	var damage error
	if !recount {
		d, err := q.cursorDamage(target)
		if err != nil {
			return 0, err
		}
		if d != nil {
			target, damage = d.loc, d
		}
	}
	n, ierr := q.moveIndexed(target, !recount)
	if ierr == nil {
		q.compactPoint("indexed")
	}
	var left *damageLeft
	if !errors.As(ierr, &left) {
		if ierr != nil {
			return n, ierr
		}
	} else {
		target, damage = left.loc, ierr
	}
	m, err := q.moveCursorRegion(target, recount)
	if err == nil {
		err = q.log.Flush()
	}
	if err == nil {
		q.compactPoint("flushed")
		err = damage
	}
	return n + m, err
}

// cursorDamage returns, as a *damageLeft, the lowest entry between the
// cursor and target that does not read: the never-delivered message there
// holds the log from it on, so a compaction copies nothing above it, and
// a retry copies nothing again. It returns nil when every entry reads
// (or the log was cut meanwhile: moveCursorRegion reads it all again), and
// an error when the reading fails otherwise.
func (q *Queue) cursorDamage(target uint64) (*damageLeft, error) {
	q.mu.Lock()
	from := max(q.mu.st.cursor, q.log.FirstLSN())
	q.mu.Unlock()
	r := q.log.NewReader(from)
	defer r.Close()
	for from < target {
		lsn, _, err := r.Next()
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, wal.ErrNotFound) || (err == nil && lsn >= target):
			return nil, nil
		case errors.Is(err, wal.ErrCorrupt):
			return &damageLeft{loc: from, err: wrapCorrupt("read cursor region", err)}, nil
		case err != nil:
			return nil, fmt.Errorf("queue: read cursor region: %w", err)
		}
		from = lsn + 1
	}
	return nil, nil
}

// damageLeft is the error of a compaction that left a damaged record
// where it is: the record still holds the log from loc on.
type damageLeft struct {
	loc uint64
	err error // ErrCorrupt: what the read or the check found
}

func (d *damageLeft) Error() string {
	return fmt.Sprintf("queue: compaction left the record at LSN %d where it is, holding the log from there: %v", d.loc, d.err)
}

func (d *damageLeft) Unwrap() error { return d.err }

// pinned is an indexed message to copy forward: the LSN of its record and
// the move that copies it.
type pinned struct {
	loc  uint64
	move func(*pacer) (bool, error)
}

// moveIndexed copies forward the indexed messages whose record is before
// target, lowest record first. With stop, it stops at the first damaged
// record and returns its *damageLeft; without, it goes past it.
func (q *Queue) moveIndexed(target uint64, stop bool) (int, error) {
	moved := 0
	var p pacer
	for _, pm := range q.pinnedBelow(target) {
		ok, err := pm.move(&p)
		var left *damageLeft
		if errors.As(err, &left) && !stop {
			continue
		}
		if err != nil {
			return moved, err
		}
		if ok {
			moved++
		}
	}
	return moved, nil
}

// pinnedBelow returns the indexed messages whose record is before target,
// ordered by the LSN of their record.
func (q *Queue) pinnedBelow(target uint64) []pinned {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []pinned
	q.mu.st.table.Ascend(func(e index.Entry) bool {
		if e.Loc < target {
			out = append(out, pinned{e.Loc, func(p *pacer) (bool, error) { return q.moveEntry(e, p) }})
		}
		return true
	})
	q.mu.st.sorted.Values(func(v index.SortedValue) bool {
		if v.Loc < target {
			out = append(out, pinned{v.Loc, func(p *pacer) (bool, error) { return q.moveValue(v, p) }})
		}
		return true
	})
	for _, lv := range leasedBelow(q.mu.st.sorted, target) {
		out = append(out, pinned{lv.Loc, func(p *pacer) (bool, error) { return q.moveLeasedValue(lv, p) }})
	}
	slices.SortFunc(out, func(a, b pinned) int { return cmp.Compare(a.loc, b.loc) })
	return out
}

// leasedValue is a value of a sorted queue's leased batch.
type leasedValue struct {
	lease uint64 // the batch
	index.SortedValue
}

// leasedBelow returns the values of sq's leased batches whose record is
// before target.
func leasedBelow(sq *index.Sorted, target uint64) []leasedValue {
	var out []leasedValue
	sq.Batches(func(b index.Batch) bool {
		for _, v := range b.Values {
			if v.Loc < target {
				out = append(out, leasedValue{b.Lease, v})
			}
		}
		return true
	})
	return out
}

// readMovable reads the record at loc for a copy forward, without the
// lock, and checks with check that it is the one the index names. A record
// that a salvaging open lost is reported as lost. A record that is
// damaged (ErrCorrupt: its checksum, or another message's record) comes
// back nil with a *damageLeft error: it is not copied, never given a fresh
// checksum, and stays where it is, so the delivery that reaches it
// reports the damage (a ReadError). Any other error is returned.
func (q *Queue) readMovable(loc uint64, check func(*record) error) (r *record, lost bool, err error) {
	r, err = q.readRecord(loc)
	if err == nil {
		err = check(r)
	}
	switch {
	case err == nil:
		return r, false, nil
	case errors.Is(err, wal.ErrNotFound) && q.opts.Salvage:
		return nil, true, nil
	case errors.Is(err, ErrCorrupt):
		return nil, false, &damageLeft{loc: loc, err: err}
	}
	return nil, false, err
}

// moveEntry copies the payload record of e forward if e is still where it
// was; it reads the payload without the lock. A damaged record stays where
// it is (readMovable).
func (q *Queue) moveEntry(e index.Entry, p *pacer) (bool, error) {
	r, lost, err := q.readMovable(e.Loc, func(r *record) error { return checkPayloadRecord(r, e.Seq, e.Loc) })
	if r == nil && !lost {
		return false, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	cur, ok := q.mu.st.table.Get(e.Seq)
	if !ok || cur.Loc != e.Loc {
		return false, nil
	}
	rec := &record{Op: opDrop, Seq: e.Seq, At: q.now(), Reason: lostReason}
	if !lost {
		rec = &record{Op: opMove, Seq: e.Seq, ID: cur.ID, At: q.now(), Enq: cur.EnqueuedAt,
			Count: cur.Deliveries, Headers: r.Headers, Payload: r.Payload}
	}
	return q.appendPaced(rec, p)
}

// appendPaced appends a move's record and then, without the lock (which
// the caller holds and gets back), waits as p says.
func (q *Queue) appendPaced(rec *record, p *pacer) (bool, error) {
	c, err := q.appendLocked(rec, nil)
	if err != nil {
		return false, err
	}
	q.mu.Unlock()
	q.compactPoint("copy")
	err = p.add(c, len(rec.Payload))
	q.mu.Lock()
	return err == nil, err
}

// moveValue copies a sorted queue's pending or dead value forward. A
// damaged record stays where it is (readMovable).
func (q *Queue) moveValue(v index.SortedValue, p *pacer) (bool, error) {
	r, lost, err := q.readMovable(v.Loc, func(r *record) error { return checkValueRecord(r, v) })
	if r == nil && !lost {
		return false, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.mu.st.sorted.HasValueAt(v) {
		return false, nil
	}
	rec := &record{Op: opDrop, Seq: v.Seq, Flags: flagSorted, Key: v.Key, Sort: v.Sort, At: q.now(),
		Reason: lostReason}
	if !lost {
		rec = &record{Op: opMove, Seq: v.Seq, Flags: flagSorted, Key: v.Key, Sort: v.Sort,
			At: q.now(), Enq: v.At, Payload: r.Payload}
	}
	return q.appendPaced(rec, p)
}

// moveLeasedValue copies a value of a sorted queue's leased batch forward,
// if the batch still holds it where it was: a batch its consumer keeps
// for long (extending its lease) must not pin the log. The copy names the
// batch (Lease). A value whose record is damaged (readMovable), or lost in
// a salvaging open, is left where it is, as it was before leased values
// were copied: its pull failed with a ReadError, and its consumer or the
// lease's end settles it (a salvaging open ended every lease before it
// copies, so only a batch pulled since holds such a value).
func (q *Queue) moveLeasedValue(lv leasedValue, p *pacer) (bool, error) {
	r, _, err := q.readMovable(lv.Loc, func(r *record) error { return checkValueRecord(r, lv.SortedValue) })
	if r == nil {
		return false, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if cur, ok := q.mu.st.sorted.LeasedValue(lv.lease, lv.Seq); !ok || cur.Loc != lv.Loc {
		return false, nil
	}
	rec := &record{Op: opMove, Seq: lv.Seq, Lease: lv.lease, Flags: flagSorted, Key: lv.Key, Sort: lv.Sort,
		At: q.now(), Enq: lv.At, Payload: r.Payload}
	return q.appendPaced(rec, p)
}

// candidate is a never-delivered message read from the cursor region.
type candidate struct {
	lsn  uint64  // its enqueue record
	rec  *record // the record
	size int     // the record's encoded size
}

// moveCursorRegion copies forward the never-delivered messages between the
// cursor and target, then advances the cursor to target.
func (q *Queue) moveCursorRegion(target uint64, recount bool) (int, error) {
	q.mu.Lock()
	from := q.mu.st.cursor
	q.mu.Unlock()
	moved := 0
	for from < target {
		batch, next, err := q.readCandidates(from, target)
		if err != nil {
			return moved, err
		}
		n, c, err := q.moveCandidates(batch, next)
		moved += n
		if err == nil {
			err = waitWritten(c) // at most a chunk of copies in memory
		}
		if err != nil {
			return moved, err
		}
		from = next
	}
	if err := q.advanceCursor(target, recount); err != nil {
		return moved, err
	}
	q.compactPoint("advanced")
	return moved, nil
}

// readCandidates reads enqueue records from from up to target, about
// moveChunk payload bytes of them, and returns them with the LSN to go on
// from.
func (q *Queue) readCandidates(from, target uint64) ([]candidate, uint64, error) {
	// A compaction may have cut the log past from, before the reading or
	// while it goes on (the housekeeper's, woken by this move's copies): it
	// cuts only what holds nothing live, so the reading goes on where the
	// log starts.
	r := q.log.NewReader(max(from, q.log.FirstLSN()))
	defer func() { r.Close() }()
	var out []candidate
	bytes := 0
	for bytes < moveChunk {
		lsn, b, err := r.Next()
		if errors.Is(err, io.EOF) || (err == nil && lsn >= target) {
			return out, target, nil
		}
		if errors.Is(err, wal.ErrNotFound) && q.log.FirstLSN() > from {
			from = q.log.FirstLSN()
			r.Close()
			r = q.log.NewReader(from)
			continue
		}
		if err != nil {
			return nil, 0, wrapCorrupt("read cursor region", err)
		}
		from = lsn + 1
		if peekOp(b) != opEnqueue {
			continue
		}
		rec := new(record)
		if err := decodeRecord(b, rec); err != nil {
			return nil, 0, fmt.Errorf("queue: record at LSN %d: %w", lsn, err)
		}
		if rec.Due != 0 {
			continue // delayed: the table owns it, not the cursor
		}
		out = append(out, candidate{lsn: lsn, rec: rec, size: len(b)})
		bytes += len(b)
	}
	return out, from, nil
}

// moveCandidates appends a copy of each candidate that the cursor still
// owns (not delivered since it was read), then advances the cursor to next,
// all under one hold of the lock, so that the cursor never meets the
// original of a message it no longer owns. It returns the last commit.
func (q *Queue) moveCandidates(cs []candidate, next uint64) (int, *wal.Commit, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := q.mu.st
	moved := 0
	var last *wal.Commit
	for _, c := range cs {
		if c.lsn < st.cursor {
			continue
		}
		rec := &record{Op: opMove, Seq: c.lsn, Flags: flagCursor, ID: c.rec.ID, At: q.now(),
			Enq: c.rec.At, Size: uint32(c.size), Headers: c.rec.Headers, Payload: c.rec.Payload}
		if len(st.lost.gone) > 0 && !st.lost.gone.copy(c.lsn, rec) {
			moved++ // acked or purged: the advance below passes it
			continue
		}
		cm, err := q.appendLocked(rec, nil)
		if err != nil {
			return moved, nil, err
		}
		last = cm
		moved++
		q.compactPoint("cursor-copy")
	}
	if next <= st.cursor {
		return moved, last, nil
	}
	q.compactPoint("copied")
	cm, err := q.appendLocked(&record{Op: opAdvance, Seq: next, At: q.now()}, nil)
	if err != nil {
		return moved, nil, err
	}
	q.resetCursorLocked()
	return moved, cm, nil
}

// advanceCursor moves the cursor to target (if it is not past it) with a
// record, and repositions the cursor's reader. With recount it first
// counts the never-delivered messages from target on.
func (q *Queue) advanceCursor(target uint64, recount bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := q.mu.st
	if st.cursor >= target && !recount {
		return nil
	}
	rec := &record{Op: opAdvance, Seq: max(target, st.cursor), At: q.now()}
	if recount {
		n, bytes, err := q.countPending(rec.Seq)
		if err != nil {
			return err
		}
		rec.setPendingCount(n, bytes)
	}
	if _, err := q.appendLocked(rec, nil); err != nil {
		return err
	}
	q.resetCursorLocked()
	return nil
}

// countPending counts the never-delivered, non-delayed enqueue records from
// from on, and their bytes. The caller holds the lock.
func (q *Queue) countPending(from uint64) (int64, int64, error) {
	r := q.log.NewReader(from)
	defer r.Close()
	var n, bytes int64
	for {
		lsn, b, err := r.Next()
		if errors.Is(err, io.EOF) {
			return n, bytes, nil
		}
		if err != nil {
			return 0, 0, wrapCorrupt("count pending", err)
		}
		if peekOp(b) != opEnqueue {
			continue
		}
		var rec record
		if err := decodeRecord(b, &rec); err != nil {
			return 0, 0, fmt.Errorf("queue: record at LSN %d: %w", lsn, err)
		}
		if rec.Due == 0 { // a delayed message is the table's
			n++
			bytes += int64(len(b))
		}
	}
}
