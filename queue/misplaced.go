package queue

import (
	"fmt"

	"github.com/walq/walq/index"
)

// misplacedReason is the reason a salvage's drop record gives for a
// message whose record is another's.
const misplacedReason = "the index names another record"

// misplaced is an indexed message or a pending or dead sorted value whose
// record, read where the index has it, is not its own: every checksum is
// fine, but a delivery refuses it and a compaction stops at it.
type misplaced struct {
	lost Lost    // the message
	drop *record // the record that drops it (At not set)
	err  error   // what the check found (ErrCorrupt)
}

// findMisplaced checks the record of every indexed message and every
// pending or dead sorted value of st, read with read, as a delivery does,
// and returns those that fail. A record that cannot be read or decoded is
// an error: the log's own checks report that damage.
func findMisplaced(st *state, read func(uint64) ([]byte, error)) ([]misplaced, error) {
	var out []misplaced
	var rerr error
	check := func(loc uint64, chk func(*record) error, m misplaced) bool {
		b, err := read(loc)
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
				drop: &record{Op: opDrop, Seq: v.Seq, Flags: flagSorted, Key: v.Key, Sort: v.Sort, Reason: misplacedReason}})
		})
	}
	return out, rerr
}

// dropMisplaced is a salvaging open's last step: it drops every message
// and value findMisplaced returns, with a record, and adds them to
// Recovery.Dropped, so that deliveries and compactions no longer meet
// them. Open calls it before anything else runs.
func (q *Queue) dropMisplaced() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	ms, err := findMisplaced(q.mu.st, q.log.Read)
	if err != nil || len(ms) == 0 {
		return err
	}
	for _, m := range ms {
		m.drop.At = q.now()
		if _, err := q.appendLocked(m.drop, nil); err != nil {
			return err
		}
		q.recovery.Dropped = append(q.recovery.Dropped, m.lost)
	}
	q.mu.Unlock()
	err = q.log.Flush()
	q.mu.Lock()
	return err
}
