package queue

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/walq/walq/index"
	"github.com/walq/walq/wal"
)

// misplacedReason is the reason a salvage's drop record gives for a
// message whose record is another's.
const misplacedReason = "the index names another record"

// misplaced is an indexed message or a sorted value (pending, dead or
// leased) whose record, read where the index has it, is not its own: every
// checksum is fine, but a delivery refuses it and a compaction stops at it.
type misplaced struct {
	lost  Lost    // the message
	drop  *record // the record that drops it (At not set)
	lease uint64  // the batch that leases the value; 0 when not leased
	err   error   // what the check found (ErrCorrupt)
}

// lostReason is the reason a salvage's drop record gives for a message
// whose record the log no longer holds.
const lostReason = "record lost to log damage"

// findMisplaced checks the record of every indexed message and every
// sorted value of st (pending, dead, then leased), read with read, as a
// delivery does, and returns those that fail, by Seq. A record that cannot be read or decoded is
// an error: the log's own checks report that damage. With lost set, a
// record the log no longer holds (wal.ErrNotFound, which a salvaging open
// reads for what the damage took) is returned too, with lostReason: a
// read-only salvaging open, which copies nothing past the damage, finds
// both kinds of drop in one walk.
func findMisplaced(st *state, read func(uint64) ([]byte, error), lost bool) ([]misplaced, error) {
	var out []misplaced
	var rerr error
	check := func(loc uint64, chk func(*record) error, m misplaced) bool {
		b, err := read(loc)
		if lost && errors.Is(err, wal.ErrNotFound) {
			m.err, m.drop.Reason = err, lostReason
			out = append(out, m)
			return true
		}
		if err != nil {
			rerr = wrapCorrupt(fmt.Sprintf("read LSN %d", loc), err)
			return false
		}
		var r record
		if err := decodeRecord(b, &r); err != nil {
			rerr = fmt.Errorf("queue: record at LSN %d: %w", loc, err)
			return false
		}
		if m.err = chk(&r); m.err != nil {
			out = append(out, m)
		}
		return true
	}
	st.table.Ascend(func(e index.Entry) bool {
		return check(e.Loc, func(r *record) error { return checkPayloadRecord(r, e.Seq, e.Loc) }, misplaced{
			lost: Lost{Seq: e.Seq, ID: e.ID},
			drop: &record{Op: opDrop, Seq: e.Seq, Reason: misplacedReason}})
	})
	if rerr == nil {
		st.sorted.Values(func(v index.SortedValue) bool {
			return check(v.Loc, func(r *record) error { return checkValueRecord(r, v) }, misplaced{
				lost: Lost{Seq: v.Seq, ID: v.Key},
				drop: valueDrop(v)})
		})
	}
	if rerr == nil {
		st.sorted.Batches(func(b index.Batch) bool {
			for _, v := range b.Values {
				m := misplaced{lost: Lost{Seq: v.Seq, ID: v.Key}, drop: valueDrop(v), lease: b.Lease}
				if !check(v.Loc, func(r *record) error { return checkValueRecord(r, v) }, m) {
					return false
				}
			}
			return true
		})
	}
	slices.SortStableFunc(out, func(a, b misplaced) int { return cmp.Compare(a.lost.Seq, b.lost.Seq) })
	return out, rerr
}

// valueDrop returns the record that drops the sorted value v as another's
// (At not set).
func valueDrop(v index.SortedValue) *record {
	return &record{Op: opDrop, Seq: v.Seq, Flags: flagSorted, Key: v.Key, Sort: v.Sort, Reason: misplacedReason}
}

// misplacedReturn returns the record that ends the lease of m's batch
// with reason, or nil when m is not leased or its batch went back
// already: a read-only salvaging open shows with it how the salvage ends
// a crashed process's leases before its drops (EndLeases).
func (q *Queue) misplacedReturn(m misplaced, reason string) *record {
	if m.lease == 0 {
		return nil
	}
	b, ok := q.mu.st.sorted.Batch(m.lease)
	if !ok {
		return nil
	}
	return q.returnBatch(b, q.now(), reason)
}

// dropOf returns the record that drops m now: of m's batch (Lease set)
// while the batch still leases m's value, else of the pending or dead
// value or of the message.
func (q *Queue) dropOf(m misplaced) *record {
	m.drop.At, m.drop.Lease = q.now(), 0
	if m.lease != 0 {
		if _, ok := q.mu.st.sorted.LeasedValue(m.lease, m.lost.Seq); ok {
			m.drop.Lease = m.lease
		}
	}
	return m.drop
}

// dropMisplaced is a salvaging open's last step: it drops every message
// and value findMisplaced returns, with a record, and adds them to
// Recovery.Dropped, so that deliveries and compactions no longer meet
// them. A leased value leaves its batch, which keeps its other values,
// its lease and its deadline: nothing failed them, so no delivery is
// counted against them and the consumer's receipt still settles them.
// Open calls it before anything else runs.
func (q *Queue) dropMisplaced() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	ms, err := findMisplaced(q.mu.st, q.log.Read, false)
	if err != nil || len(ms) == 0 {
		return err
	}
	for _, m := range ms {
		if _, err := q.appendLocked(q.dropOf(m), nil); err != nil {
			return err
		}
		q.recovery.Dropped = append(q.recovery.Dropped, m.lost)
	}
	q.mu.Unlock()
	err = q.log.Flush()
	q.mu.Lock()
	return err
}

// showDrops gives a read-only salvaging open (ReadOnly and Salvage) the
// drops a salvage makes, in memory only: the messages and values whose
// record the damage took (CopyPast) and then those whose record is
// another's (dropMisplaced), in that order, each dropped from the state
// and added to Recovery.Dropped as the salvage adds it. When the salvage
// ends a crashed process's leases (EndLeases), a leased value's batch
// goes back first, before any drop and with that reason (its values at
// MaxDeliveries go dead saying so); otherwise the value leaves its batch
// as dropMisplaced drops it. Nothing is written.
func (q *Queue) showDrops() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	ms, err := findMisplaced(q.mu.st, q.log.Read, true)
	if err != nil {
		return err
	}
	slices.SortStableFunc(ms, func(a, b misplaced) int { return cmp.Compare(dropRank(a), dropRank(b)) })
	if endsLeases(q.recovery) {
		for _, m := range ms {
			if err := q.showReturn(m, crashedBatchReason); err != nil {
				return err
			}
		}
	}
	for _, m := range ms {
		drop := q.dropOf(m)
		if err := q.mu.st.check(drop); err != nil {
			return fmt.Errorf("%w: salvage preview: %w", ErrCorrupt, err)
		}
		q.mu.st.applyDrop(drop)
		q.recovery.Dropped = append(q.recovery.Dropped, m.lost)
	}
	return nil
}

// showReturn applies to the state the return of m's batch, with reason,
// if m is leased and its batch has not gone back (misplacedReturn).
func (q *Queue) showReturn(m misplaced, reason string) error {
	ret := q.misplacedReturn(m, reason)
	if ret == nil {
		return nil
	}
	if err := q.mu.st.check(ret); err != nil {
		return fmt.Errorf("%w: salvage preview: %w", ErrCorrupt, err)
	}
	q.mu.st.applyBatch(ret)
	return nil
}

// dropRank orders a salvage's drops: lost records first, as CopyPast
// drops them before dropMisplaced runs.
func dropRank(m misplaced) int {
	if m.drop.Reason == lostReason {
		return 0
	}
	return 1
}
