package queue

import (
	"bytes"
	"fmt"
	"time"

	"github.com/walq/walq/index"
)

// counters are lifetime totals, kept in snapshots.
type counters struct {
	_msgpack     struct{} `msgpack:",as_array"` // stored in snapshots as an array
	Enqueued     uint64   // enqueue records
	Delivered    uint64   // lease records
	Acked        uint64   // ack records
	Nacked       uint64   // nack records
	Expired      uint64   // expire records
	DeadLettered uint64   // dead records
	Moved        uint64   // move records
	Published    uint64   // sorted queue: publish records
	Pulled       uint64   // sorted queue: batches pulled
	BatchesAcked uint64   // sorted queue: batches acked
}

// state is everything recovery rebuilds: the result of applying every
// record in LSN order. The queue guards it with its mutex.
type state struct {
	table        *index.Table  // messages the cursor no longer accounts for
	dedup        *index.Dedup  // producer-given ids that refuse duplicates
	cursor       uint64        // next LSN the cursor examines
	pending      int64         // never-delivered, non-delayed messages at or after cursor
	pendingBytes int64         // bytes of their enqueue records
	last         uint64        // LSN of the last record applied
	clean        bool          // the last record applied was a clean close
	counts       counters      // lifetime totals
	dedupWindow  bool          // acked producer ids are remembered (DedupWindow > 0)
	salvage      bool          // a salvaging open: replay applies an ack whose lease was lost (settledAnyway)
	lost         salvageMarks  // salvage: what replay learned of deliveries whose lease record was lost; zero once CopyPast ran
	sorted       *index.Sorted // a sorted queue's values and batches
	cacheBytes   int64         // payload bytes of sorted values kept in memory at most
}

func newState(o *Options) *state {
	return &state{
		table: index.NewTable(), dedup: index.NewDedup(), cursor: 1,
		dedupWindow: o.DedupWindow > 0, salvage: o.Salvage,
		sorted: index.NewSorted(o.singleFlight), cacheBytes: o.cacheBytes,
	}
}

// liveBytes is the log bytes the live messages need.
func (s *state) liveBytes() int64 { return s.table.Bytes() + s.pendingBytes + s.sorted.Bytes() }

// apply changes the state by one record whose LSN is lsn and whose encoded
// size is size. It is the only place the state changes, both live and
// during replay, so the two cannot disagree. It is all or nothing: a
// record that does not apply (check) changes nothing and is reported as
// ErrCorrupt, since a log record that does not apply is damage.
func (s *state) apply(lsn uint64, r *record, size int) error {
	if err := s.check(r); err != nil {
		return fmt.Errorf("%w: LSN %d: %w", ErrCorrupt, lsn, err)
	}
	s.change(lsn, r, size)
	return nil
}

// check reports whether the record r applies to the state: nil, or why
// not, wrapping ErrInvalidChange. It changes nothing and does not depend
// on the record's LSN or on the time: the queue runs it before it appends
// a record (appendLSNLocked), so a record that would not apply is refused
// and never written, and replay runs it again with the same answer.
func (s *state) check(r *record) error {
	if namesEntry(r.Op) {
		e, ok := s.table.Get(r.Seq)
		return s.checkOf(r, e, ok)
	}
	switch r.Op {
	case opEnqueue, opClose, opAdvance, opPublish:
		return nil
	case opMove, opMoveDead:
		return s.checkMove(r)
	case opDrop:
		return s.checkDrop(r)
	case opPull, opBatchAck, opBatchReturn, opBatchExtend, opBatchDead, opValueRevive, opValuePurge, opValueDead:
		return s.checkSorted(r)
	}
	return fmt.Errorf("%w: unknown op %d", ErrInvalidChange, r.Op)
}

// namesEntry reports whether records of op o change the table's entry
// for their Seq, or make one (a first lease): check and change look it up
// once and hand it to checkOf and changeOf.
func namesEntry(o op) bool { return o <= lastOp && entryOps[o] }

// entryOps are the ops namesEntry reports.
var entryOps = [lastOp + 1]bool{opLease: true, opAck: true, opNack: true, opExtend: true,
	opExpire: true, opDead: true, opRequeueDead: true, opPurge: true}

// checkOf is check for a record that namesEntry marks, given the table's
// entry for r.Seq (ok false when it has none), as looked up under the
// same lock with no change since: the queue's settle and lease paths have
// it in hand already (appendOfLocked).
func (s *state) checkOf(r *record, e index.Entry, ok bool) error {
	switch {
	case r.Op == opLease:
		return s.checkLease(r, e, ok)
	case !ok:
		return fmt.Errorf("%w: %s of unknown message %d", ErrInvalidChange, opName(r.Op), r.Seq)
	}
	return checkNamed(r, e)
}

// change applies a record that check accepted; it cannot fail.
func (s *state) change(lsn uint64, r *record, size int) {
	if namesEntry(r.Op) {
		e, ok := s.table.Get(r.Seq) // check found it, or, for a first lease, found none
		s.changeOf(lsn, r, e, ok)
		return
	}
	s.last, s.clean = lsn, r.Op == opClose
	switch r.Op {
	case opEnqueue:
		s.applyEnqueue(lsn, r, size)
	case opMove, opMoveDead:
		s.applyMove(lsn, r, size)
	case opPublish, opPull, opBatchAck, opBatchReturn, opBatchExtend, opBatchDead, opValueRevive, opValuePurge, opValueDead:
		s.applySorted(lsn, r, size)
	case opAdvance:
		s.applyAdvance(r)
	case opDrop:
		s.applyDrop(r)
	}
}

// changeOf is change for a record that check (or checkOf) accepted and
// that namesEntry marks, given the table's entry for r.Seq as checkOf was.
func (s *state) changeOf(lsn uint64, r *record, e index.Entry, ok bool) {
	s.last, s.clean = lsn, false
	if r.Op == opLease {
		s.applyLease(lsn, r, e, ok)
		return
	}
	s.applyChange(r, e)
}

// skip records that replay passed over the record at lsn without applying
// it (a salvaging open), so that the next snapshot covers it and a later
// replay does not meet it again.
func (s *state) skip(lsn uint64) { s.last, s.clean = max(s.last, lsn), false }

// checkNamed verifies that a change of the message e finds it in the state
// the change needs: a change that names a lease names the current one.
func checkNamed(r *record, e index.Entry) error {
	switch r.Op {
	case opAck, opNack, opExtend, opExpire:
		if e.State != index.Leased || e.Lease != r.Lease {
			return fmt.Errorf("%w: %s of message %d names lease %d, current %d", ErrInvalidChange, opName(r.Op), r.Seq, r.Lease, e.Lease)
		}
	case opDead:
		if r.Lease != 0 && (e.State != index.Leased || e.Lease != r.Lease) {
			return fmt.Errorf("%w: dead-letter of message %d names lease %d, current %d", ErrInvalidChange, r.Seq, r.Lease, e.Lease)
		}
	case opRequeueDead, opPurge:
		if e.State != index.Dead {
			return fmt.Errorf("%w: %s of message %d that is %s", ErrInvalidChange, opName(r.Op), r.Seq, e.State)
		}
	}
	return nil
}

// checkLease verifies that a lease record leases a message that may be
// delivered: a ready or delayed entry e (ok), or, with none, one at or
// after the cursor.
func (s *state) checkLease(r *record, e index.Entry, ok bool) error {
	switch {
	case !ok && r.Seq < s.cursor:
		return fmt.Errorf("%w: lease of message %d behind the cursor %d", ErrInvalidChange, r.Seq, s.cursor)
	case ok && e.State != index.Ready && e.State != index.Delayed:
		return fmt.Errorf("%w: lease of message %d that is %s", ErrInvalidChange, r.Seq, e.State)
	}
	return nil
}

// checkMove verifies that a move copies a value or message the state
// still holds, or, with flagCursor, a never-delivered one the cursor owns
// (or, in a salvage, passed in a jump: salvageMarks).
func (s *state) checkMove(r *record) error {
	switch {
	case r.Op == opMoveDead && r.Flags&(flagCursor|flagSorted) != flagCursor:
		return fmt.Errorf("%w: move-dead of message %d is not a cursor move", ErrInvalidChange, r.Seq)
	case r.Flags&flagSorted != 0:
		return s.checkSortedMove(r)
	case r.Flags&flagCursor != 0:
		if r.Seq < s.cursor && !s.lost.jumped(r.Seq) {
			return fmt.Errorf("%w: move of message %d behind the cursor %d", ErrInvalidChange, r.Seq, s.cursor)
		}
		if _, ok := s.table.Get(r.Seq); ok {
			return fmt.Errorf("%w: move of indexed message %d", ErrInvalidChange, r.Seq)
		}
	default:
		if _, ok := s.table.Get(r.Seq); !ok {
			return fmt.Errorf("%w: move of unknown message %d", ErrInvalidChange, r.Seq)
		}
	}
	return nil
}

// checkSortedMove verifies that a sorted value's move copies a value the
// state holds: pending or dead, or, with a Lease, in that leased batch.
func (s *state) checkSortedMove(r *record) error {
	v := index.SortedValue{Key: r.Key, Sort: r.Sort, Seq: r.Seq}
	if r.Lease == 0 {
		if !s.sorted.HasValue(v) {
			return fmt.Errorf("%w: move of unknown value %d", ErrInvalidChange, r.Seq)
		}
		return nil
	}
	cur, ok := s.sorted.LeasedValue(r.Lease, r.Seq)
	if !ok || cur.Key != r.Key || !bytes.Equal(cur.Sort, r.Sort) {
		return fmt.Errorf("%w: move of value %d, not in batch %d", ErrInvalidChange, r.Seq, r.Lease)
	}
	return nil
}

// checkDrop verifies that a drop names a message or value the state holds.
func (s *state) checkDrop(r *record) error {
	if r.Flags&flagSorted != 0 && r.Lease != 0 {
		v, ok := s.sorted.LeasedValue(r.Lease, r.Seq)
		if !ok || v.Key != r.Key || !bytes.Equal(v.Sort, r.Sort) {
			return fmt.Errorf("%w: drop of value %d, not in batch %d", ErrInvalidChange, r.Seq, r.Lease)
		}
		return nil
	}
	if r.Flags&flagSorted != 0 {
		if !s.sorted.HasValue(index.SortedValue{Key: r.Key, Sort: r.Sort, Seq: r.Seq}) {
			return fmt.Errorf("%w: drop of unknown value %d", ErrInvalidChange, r.Seq)
		}
		return nil
	}
	if _, ok := s.table.Get(r.Seq); !ok {
		return fmt.Errorf("%w: drop of unknown message %d", ErrInvalidChange, r.Seq)
	}
	return nil
}

func (s *state) applyChange(r *record, e index.Entry) {
	switch r.Op {
	case opAck:
		s.table.Delete(e.Seq)
		s.forgetID(e, r.At)
		s.counts.Acked++
	case opNack:
		s.counts.Nacked++
		s.table.Put(readyAt(e, r.Due))
	case opExtend:
		e.Due = r.Due
		s.table.Put(e)
	case opExpire:
		s.counts.Expired++
		s.table.Put(readyAt(e, 0))
	case opDead:
		e.State, e.Due, e.Lease, e.Reason = index.Dead, 0, 0, r.Reason
		s.table.Put(e)
		s.counts.DeadLettered++
	case opRequeueDead:
		e.Deliveries, e.Reason = 0, ""
		s.table.Put(readyAt(e, 0))
	case opPurge:
		s.table.Delete(e.Seq)
		s.forgetID(e, r.At)
	}
}

// readyAt returns e made ready, or delayed until due when due is set (not
// 0: negative is a time before 1970).
func readyAt(e index.Entry, due int64) index.Entry {
	e.State, e.Due, e.Lease, e.DeliveredAt = index.Ready, 0, 0, 0
	if due != 0 {
		e.State, e.Due = index.Delayed, due
	}
	return e
}

// keepsID reports whether applying r may read its ID: for every record
// but a plain enqueue (no producer id, no delay), whose message the state
// only counts (applyEnqueue) and whose ID the cursor reads from the log
// when it delivers it. A replay makes a string of the ID only where this
// says so (ownKept): a change to what applyEnqueue keeps changes this too.
func keepsID(r *record) bool {
	return r.Op != opEnqueue || r.Flags&flagProducerID != 0 || r.Due != 0
}

func (s *state) applyEnqueue(lsn uint64, r *record, size int) {
	s.counts.Enqueued++
	if r.Flags&flagProducerID != 0 {
		s.dedup.Put(index.DedupItem{ID: r.ID, Seq: lsn})
	}
	if r.Due != 0 { // delayed, as the cursor takes it (cursorNextLocked); negative before 1970
		s.table.Put(index.Entry{
			Seq: lsn, Loc: lsn, ID: r.ID, Size: uint32(size), EnqueuedAt: r.At,
			State: index.Delayed, Due: r.Due,
		})
		return
	}
	s.pending++
	s.pendingBytes += int64(size)
}

func (s *state) applyLease(lsn uint64, r *record, e index.Entry, ok bool) {
	s.counts.Delivered++
	if !ok {
		// A first delivery, from the cursor.
		s.cursor = r.Seq + 1
		s.pending--
		s.pendingBytes -= int64(r.Size)
		e = index.Entry{Seq: r.Seq, Loc: r.Seq, ID: r.ID, Size: r.Size, EnqueuedAt: r.Enq}
	}
	e.State, e.Due, e.Lease, e.DeliveredAt = index.Leased, r.Due, lsn, r.At
	e.Deliveries++
	s.table.Put(e)
}

func (s *state) applyMove(lsn uint64, r *record, size int) {
	s.counts.Moved++
	switch {
	case r.Flags&flagSorted != 0 && r.Lease != 0:
		s.sorted.MoveLeased(r.Lease, r.Seq, lsn, uint32(size)) // check found it
	case r.Flags&flagSorted != 0:
		s.sorted.MoveValue(index.SortedValue{Key: r.Key, Sort: r.Sort, Seq: r.Seq}, lsn, uint32(size)) // check found it
	case r.Flags&flagCursor != 0:
		s.applyCursorMove(lsn, r, size)
	default:
		e, _ := s.table.Get(r.Seq) // check found it
		e.Loc, e.Size = lsn, uint32(size)
		s.table.Put(e)
	}
}

// forgetID updates the dedup set once the message e is gone.
func (s *state) forgetID(e index.Entry, at int64) {
	if e.ID != "" {
		s.dedup.Acked(e.ID, e.Seq, at, s.dedupWindow)
	}
}

func opName(o op) string {
	names := [...]string{"?", "enqueue", "lease", "ack", "nack", "extend", "expire", "dead", "requeue-dead", "purge", "move", "close",
		"publish", "pull", "batch-ack", "batch-return", "batch-extend", "batch-dead", "value-revive", "value-purge",
		"advance", "drop", "move-dead", "value-dead"}
	if int(o) < len(names) {
		return names[o]
	}
	return fmt.Sprintf("op%d", o)
}

// applyCursorMove indexes a never-delivered message copied forward: it
// leaves the cursor's count and becomes a ready entry whose payload is the
// move record. The entry stays Undelivered, so it is delivered after the
// messages ready again, in enqueue order, as the cursor would have.
func (s *state) applyCursorMove(lsn uint64, r *record, size int) {
	s.pending--
	s.pendingBytes -= int64(r.Size)
	e := index.Entry{Seq: r.Seq, Loc: lsn, ID: r.ID, Size: uint32(size), EnqueuedAt: r.Enq,
		State: index.Ready, Undelivered: true}
	if r.Op == opMoveDead {
		e.State, e.Reason, e.Deliveries, e.Undelivered = index.Dead, r.Reason, r.Count, false
	}
	s.table.Put(e)
	// The cursor passes the original at once, not only at the advance
	// record that follows the copies: a crash can keep the copies and lose
	// the advance (the log may put them in different entries), and the
	// cursor must not deliver the original of a copied message. Copies are
	// made in LSN order of every never-delivered message from the cursor
	// on, so this skips nothing the cursor owns.
	s.cursor = max(s.cursor, r.Seq+1)
}

func (s *state) applyAdvance(r *record) {
	s.cursor = max(s.cursor, r.Seq)
	if r.Flags&flagRecount != 0 {
		s.pending, s.pendingBytes = r.pendingCount()
	}
}

// applyDrop forgets a message or sorted value whose record was lost or
// is another's; a leased value (Lease set) leaves its batch, which keeps
// its other values and its lease.
func (s *state) applyDrop(r *record) {
	if r.Flags&flagSorted != 0 && r.Lease != 0 {
		s.sorted.DropLeased(r.Lease, r.Seq) // check found it
		return
	}
	if r.Flags&flagSorted != 0 {
		s.sorted.Drop(index.SortedValue{Key: r.Key, Sort: r.Sort, Seq: r.Seq}) // check found it
		return
	}
	e, _ := s.table.Delete(r.Seq) // check found it
	s.forgetID(e, r.At)
}

// leased returns the entry that the delivery with receipt (seq, lease)
// still owns at now (unix ns, the queue's clock). It fails with
// ErrLeaseLost when the message was settled, is leased by another
// delivery, or the lease's deadline is at or before now, whether or not a
// requeue has run since. Every settle path (ack, nack, extend,
// dead-letter, one by one or in batches) calls it under the lock, with
// the clock read there, before it builds its record: the appended record
// is the decision, and replay applies it without asking the clock again.
func (s *state) leased(seq, lease uint64, now int64) (index.Entry, error) {
	e, ok := s.table.Get(seq)
	if !ok || e.State != index.Leased || e.Lease != lease {
		return index.Entry{}, fmt.Errorf("%w: receipt %d.%d", ErrLeaseLost, seq, lease)
	}
	if now >= e.Due {
		return index.Entry{}, fmt.Errorf("%w: receipt %d.%d ran out %v ago", ErrLeaseLost, seq, lease, time.Duration(now-e.Due))
	}
	return e, nil
}

// leasedBatch is leased for a sorted queue's batch: the batch with the
// given lease, while its deadline is after now.
func (s *state) leasedBatch(lease uint64, now int64) (index.Batch, error) {
	b, ok := s.sorted.Batch(lease)
	if !ok {
		return index.Batch{}, fmt.Errorf("%w: batch %d", ErrLeaseLost, lease)
	}
	if now >= b.Due {
		return index.Batch{}, fmt.Errorf("%w: batch %d ran out %v ago", ErrLeaseLost, lease, time.Duration(now-b.Due))
	}
	return b, nil
}
