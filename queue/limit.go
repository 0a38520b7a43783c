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

// deadAtLimit returns the record that dead-letters the ready message e,
// which pastLimit keeps from being delivered again.
func (q *Queue) deadAtLimit(e index.Entry, now int64) *record {
	return &record{Op: opDead, Seq: e.Seq, At: now,
		Reason: fmt.Sprintf("%d deliveries, limit %d; not delivered again", e.Deliveries, q.opts.MaxDeliveries)}
}
