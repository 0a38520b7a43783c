package queue

import (
	"fmt"
	"time"

	"github.com/walq/walq/index"
)

// Ack removes the message of the delivery r for good. It fails with
// ErrLeaseLost if that delivery no longer owns the message.
func (q *Queue) Ack(r Receipt) error {
	return q.settleOne(Settlement{Receipt: r, Op: SettleAck})
}

// Nack gives the message of the delivery r back: ready after delay (at once
// when 0), or dead once it has had MaxDeliveries.
func (q *Queue) Nack(r Receipt, delay time.Duration) error {
	return q.settleOne(Settlement{Receipt: r, Op: SettleNack, Delay: delay})
}

// Extend sets the lease of the delivery r to run out d from now: a d
// shorter than what is left ends the lease sooner. A d that is not
// positive is refused with ErrInvalidOptions.
func (q *Queue) Extend(r Receipt, d time.Duration) error {
	return q.settleOne(Settlement{Receipt: r, Op: SettleExtend, Delay: d})
}

// DeadLetter moves the message of the delivery r to the dead-letter set.
func (q *Queue) DeadLetter(r Receipt, reason string) error {
	return q.settleOne(Settlement{Receipt: r, Op: SettleDeadLetter, Reason: reason})
}

// AckID acks the message with the given id, whichever delivery holds it
// (the seed's ack by event id). ErrNotFound if no delivery of that id is in
// flight.
func (q *Queue) AckID(id string) error {
	r, err := q.receiptOf(id)
	if err != nil {
		return err
	}
	return q.Ack(r)
}

// NackID is Nack for the delivery that holds the message with id.
func (q *Queue) NackID(id string, delay time.Duration) error {
	r, err := q.receiptOf(id)
	if err != nil {
		return err
	}
	return q.Nack(r, delay)
}

// ExtendID is Extend for the delivery that holds the message with id.
func (q *Queue) ExtendID(id string, d time.Duration) error {
	r, err := q.receiptOf(id)
	if err != nil {
		return err
	}
	return q.Extend(r, d)
}

// DeadLetterID is DeadLetter for the delivery that holds the message with id.
func (q *Queue) DeadLetterID(id string, reason string) error {
	r, err := q.receiptOf(id)
	if err != nil {
		return err
	}
	return q.DeadLetter(r, reason)
}

// receiptOf returns the receipt of the delivery in flight for id. On a
// poisoned log it returns the poison, as a settle by receipt does before
// a refusal of its own: the state no longer tells whether the id's
// delivery was settled (a settle whose write failed is in no file).
func (q *Queue) receiptOf(id string) (Receipt, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return Receipt{}, ErrClosed
	}
	if err := q.poisonErr("settle"); err != nil {
		return Receipt{}, err
	}
	e, ok := q.mu.st.table.GetByID(id)
	if !ok || e.State != index.Leased {
		return Receipt{}, fmt.Errorf("%w: no delivery of %q in flight", ErrNotFound, id)
	}
	return Receipt{Seq: e.Seq, Lease: e.Lease}, nil
}

// settleOne is Settle of one settlement, failing with its own error.
func (q *Queue) settleOne(s Settlement) error {
	_, err := one(nil, q.Settle(s))
	return err
}
