package queue

import (
	"fmt"

	"github.com/walq/walq/index"
	"github.com/walq/walq/wal"
)

// pastLimit reports whether a message or sorted value delivered n times
// has had every delivery Options.MaxDeliveries allows. It is the one rule
// of the limit: a lease that ends without an ack (nack, expiry, the open
// after a crash) dead-letters such a message instead of making it ready,
// and a delivery meets it again, so that a message made ready while the
// limit did not apply (an open with MaxDeliveries -1, as walq's writing
// commands make, or with a higher limit) is dead-lettered by the next
// open that applies it, instead of being delivered once more.
func (q *Queue) pastLimit(n uint32) bool {
	return q.opts.MaxDeliveries > 0 && int(n) >= q.opts.MaxDeliveries
}

// killPastLimitLocked dead-letters the pending values of key that have
// had MaxDeliveries (pastLimit), which a pull would deliver again
// (appendAtLimitLocked), and returns the commit of the last one's
// record: nil when there were none.
func (q *Queue) killPastLimitLocked(key string, now int64) (*wal.Commit, error) {
	if q.opts.MaxDeliveries <= 0 {
		return nil, nil
	}
	var past []index.SortedValue
	q.mu.st.sorted.PendingOf(key, func(v index.SortedValue) bool {
		if q.pastLimit(v.Deliveries) {
			past = append(past, v)
		}
		return true
	})
	var last *wal.Commit
	for _, v := range past {
		r := &record{Op: opValueDead, Seq: v.Seq, Key: v.Key, Sort: v.Sort, At: now,
			Reason: limitReason(v.Deliveries, q.opts.MaxDeliveries)}
		c, err := q.appendAtLimitLocked(r, nil, valueDeadNote(v, r.Reason))
		if err != nil {
			return last, err
		}
		last = c
	}
	return last, nil
}

// limitReason is the dead-letter reason of a message or value that
// pastLimit kept from being delivered again.
func limitReason(deliveries uint32, limit int) string {
	return fmt.Sprintf("%d deliveries, limit %d; not delivered again", deliveries, limit)
}

// deadAtLimit returns the record that dead-letters the ready message e,
// which pastLimit keeps from being delivered again.
func (q *Queue) deadAtLimit(e index.Entry, now int64) *record {
	return &record{Op: opDead, Seq: e.Seq, At: now,
		Reason: limitReason(e.Deliveries, q.opts.MaxDeliveries)}
}

// appendAtLimitLocked appends r, the dead-lettering of a message (its
// table entry e) or sorted value (e nil) that pastLimit keeps from a
// delivery or pull, and keeps note for the housekeeper, which logs it
// once the record is as durable as Sync promises (logPendingDead). The
// record is appended lazily, as the delivery's lease is: under SyncAlways
// it starts no fsync, and the delivery, which only waits for its lease
// to be written, neither waits for one nor runs one for it. A power loss
// before the next fsync may take the dead-lettering back with the
// lease; the message or value is then at the limit again, and the next
// delivery or pull dead-letters it again. It returns the record's commit:
// the call waits for its write before it returns (a lease's wait covers
// it), so that a kill -9 keeps it, as every call's change.
func (q *Queue) appendAtLimitLocked(r *record, e *index.Entry, note deadNote) (*wal.Commit, error) {
	q.mu.lazy = true
	lsn, c, err := q.appendOfLocked(r, nil, e)
	q.mu.lazy = false
	if err != nil {
		return nil, err
	}
	d := &q.mu.dead
	d.notes, d.last, d.lsn = append(d.notes, note), c, lsn
	q.wakeHousekeeper()
	return c, nil
}
