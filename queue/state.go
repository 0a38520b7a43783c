package queue

import (
	"fmt"

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
	sorted       *index.Sorted // a sorted queue's values and batches
	cacheBytes   int64         // payload bytes of sorted values kept in memory at most
}

func newState(o *Options) *state {
	return &state{
		table: index.NewTable(), dedup: index.NewDedup(), cursor: 1,
		dedupWindow: o.DedupWindow > 0,
		sorted:      index.NewSorted(o.singleFlight), cacheBytes: o.cacheBytes,
	}
}

// liveBytes is the log bytes the live messages need.
func (s *state) liveBytes() int64 { return s.table.Bytes() + s.pendingBytes + s.sorted.Bytes() }

// apply changes the state by one record whose LSN is lsn and whose encoded
// size is size. It is the only place the state changes, both live and
// during replay, so the two cannot disagree.
func (s *state) apply(lsn uint64, r *record, size int) error {
	s.last, s.clean = lsn, r.Op == opClose
	switch r.Op {
	case opEnqueue:
		s.applyEnqueue(lsn, r, size)
		return nil
	case opLease:
		return s.applyLease(lsn, r)
	case opMove:
		return s.applyMove(lsn, r, size)
	case opPublish, opPull, opBatchAck, opBatchReturn, opBatchExtend, opBatchDead, opValueRevive, opValuePurge:
		return s.applySorted(lsn, r, size)
	case opClose:
		return nil
	case opAdvance:
		s.applyAdvance(r)
		return nil
	case opDrop:
		return s.applyDrop(r)
	}
	e, ok := s.table.Get(r.Seq)
	if !ok {
		return fmt.Errorf("%w: %s of unknown message %d", ErrCorrupt, opName(r.Op), r.Seq)
	}
	if err := checkLease(r, e); err != nil {
		return err
	}
	s.applyChange(r, e)
	return nil
}

// checkLease verifies that a change that names a lease names the current one.
func checkLease(r *record, e index.Entry) error {
	switch r.Op {
	case opAck, opNack, opExtend, opExpire:
		if e.State != index.Leased || e.Lease != r.Lease {
			return fmt.Errorf("%w: %s of message %d names lease %d, current %d", ErrCorrupt, opName(r.Op), r.Seq, r.Lease, e.Lease)
		}
	case opDead:
		if r.Lease != 0 && (e.State != index.Leased || e.Lease != r.Lease) {
			return fmt.Errorf("%w: dead-letter of message %d names lease %d, current %d", ErrCorrupt, r.Seq, r.Lease, e.Lease)
		}
	case opRequeueDead, opPurge:
		if e.State != index.Dead {
			return fmt.Errorf("%w: %s of message %d that is %s", ErrCorrupt, opName(r.Op), r.Seq, e.State)
		}
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

// readyAt returns e made ready, or delayed until due when due is set.
func readyAt(e index.Entry, due int64) index.Entry {
	e.State, e.Due, e.Lease, e.DeliveredAt = index.Ready, 0, 0, 0
	if due > 0 {
		e.State, e.Due = index.Delayed, due
	}
	return e
}

func (s *state) applyEnqueue(lsn uint64, r *record, size int) {
	s.counts.Enqueued++
	if r.Flags&flagProducerID != 0 {
		s.dedup.Put(index.DedupItem{ID: r.ID, Seq: lsn})
	}
	if r.Due > 0 {
		s.table.Put(index.Entry{
			Seq: lsn, Loc: lsn, ID: r.ID, Size: uint32(size), EnqueuedAt: r.At,
			State: index.Delayed, Due: r.Due,
		})
		return
	}
	s.pending++
	s.pendingBytes += int64(size)
}

func (s *state) applyLease(lsn uint64, r *record) error {
	s.counts.Delivered++
	e, ok := s.table.Get(r.Seq)
	if !ok {
		// A first delivery, from the cursor.
		if r.Seq < s.cursor {
			return fmt.Errorf("%w: lease %d of message %d behind the cursor %d", ErrCorrupt, lsn, r.Seq, s.cursor)
		}
		s.cursor = r.Seq + 1
		s.pending--
		s.pendingBytes -= int64(r.Size)
		e = index.Entry{Seq: r.Seq, Loc: r.Seq, ID: r.ID, Size: r.Size, EnqueuedAt: r.Enq}
	} else if e.State != index.Ready && e.State != index.Delayed {
		return fmt.Errorf("%w: lease %d of message %d that is %s", ErrCorrupt, lsn, r.Seq, e.State)
	}
	e.State, e.Due, e.Lease, e.DeliveredAt = index.Leased, r.Due, lsn, r.At
	e.Deliveries++
	s.table.Put(e)
	return nil
}

func (s *state) applyMove(lsn uint64, r *record, size int) error {
	if r.Flags&flagSorted != 0 {
		if !s.sorted.MoveValue(index.SortedValue{Key: r.Key, Sort: r.Sort, Seq: r.Seq}, lsn, uint32(size)) {
			return fmt.Errorf("%w: move of unknown value %d", ErrCorrupt, r.Seq)
		}
		s.counts.Moved++
		return nil
	}
	if r.Flags&flagCursor != 0 {
		return s.applyCursorMove(lsn, r, size)
	}
	e, ok := s.table.Get(r.Seq)
	if !ok {
		return fmt.Errorf("%w: move of unknown message %d", ErrCorrupt, r.Seq)
	}
	e.Loc, e.Size = lsn, uint32(size)
	s.table.Put(e)
	s.counts.Moved++
	return nil
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
		"advance", "drop"}
	if int(o) < len(names) {
		return names[o]
	}
	return fmt.Sprintf("op%d", o)
}

// applyCursorMove indexes a never-delivered message copied forward: it
// leaves the cursor's count and becomes a ready entry whose payload is the
// move record.
func (s *state) applyCursorMove(lsn uint64, r *record, size int) error {
	if r.Seq < s.cursor {
		return fmt.Errorf("%w: move %d of message %d behind the cursor %d", ErrCorrupt, lsn, r.Seq, s.cursor)
	}
	if _, ok := s.table.Get(r.Seq); ok {
		return fmt.Errorf("%w: move %d of indexed message %d", ErrCorrupt, lsn, r.Seq)
	}
	s.pending--
	s.pendingBytes -= int64(r.Size)
	s.table.Put(index.Entry{Seq: r.Seq, Loc: lsn, ID: r.ID, Size: uint32(size), EnqueuedAt: r.Enq, State: index.Ready})
	s.counts.Moved++
	// The cursor passes the original at once, not only at the advance
	// record that follows the copies: a crash can keep the copies and lose
	// the advance (the log may put them in different entries), and the
	// cursor must not deliver the original of a copied message. Copies are
	// made in LSN order of every never-delivered message from the cursor
	// on, so this skips nothing the cursor owns.
	s.cursor = max(s.cursor, r.Seq+1)
	return nil
}

func (s *state) applyAdvance(r *record) {
	s.cursor = max(s.cursor, r.Seq)
	if r.Flags&flagRecount != 0 {
		s.pending, s.pendingBytes = r.Enq, r.Due
	}
}

// applyDrop forgets a message or sorted value whose record was lost.
func (s *state) applyDrop(r *record) error {
	if r.Flags&flagSorted != 0 {
		if !s.sorted.Drop(index.SortedValue{Key: r.Key, Sort: r.Sort, Seq: r.Seq}) {
			return fmt.Errorf("%w: drop of unknown value %d", ErrCorrupt, r.Seq)
		}
		return nil
	}
	e, ok := s.table.Delete(r.Seq)
	if !ok {
		return fmt.Errorf("%w: drop of unknown message %d", ErrCorrupt, r.Seq)
	}
	s.forgetID(e, r.At)
	return nil
}
