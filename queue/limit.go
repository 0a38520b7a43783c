package queue

import (
	"fmt"

	"github.com/walq/walq/index"
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
// had MaxDeliveries (pastLimit), which a pull would deliver again, keeps
// them in dead to be logged without q.mu once durable (logDurableDead),
// and reports whether there were any.
func (q *Queue) killPastLimitLocked(key string, now int64, dead *deadNotes) (bool, error) {
	if q.opts.MaxDeliveries <= 0 {
		return false, nil
	}
	var past []index.SortedValue
	q.mu.st.sorted.PendingOf(key, func(v index.SortedValue) bool {
		if q.pastLimit(v.Deliveries) {
			past = append(past, v)
		}
		return true
	})
	for _, v := range past {
		r := &record{Op: opValueDead, Seq: v.Seq, Key: v.Key, Sort: v.Sort, At: now,
			Reason: limitReason(v.Deliveries, q.opts.MaxDeliveries)}
		c, err := q.appendLocked(r, nil)
		if err != nil {
			return false, err
		}
		dead.last = c
		dead.notes = append(dead.notes, valueDeadNote(v, r.Reason))
	}
	return len(past) > 0, nil
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
