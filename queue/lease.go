package queue

import (
	"fmt"
	"time"

	"github.com/walq/walq/index"
)

// Ack removes the message of the delivery r for good. It fails with
// ErrLeaseLost if that delivery no longer owns the message.
func (q *Queue) Ack(r Receipt) error {
	return q.changeLease(r, func(e index.Entry, now int64) *record {
		return &record{Op: opAck, Seq: e.Seq, Lease: e.Lease, At: now}
	})
}

// Nack gives the message of the delivery r back: ready after delay (at once
// when 0), or dead once it has had MaxDeliveries.
func (q *Queue) Nack(r Receipt, delay time.Duration) error {
	if delay < 0 {
		return fmt.Errorf("%w: negative nack delay %v", ErrInvalidOptions, delay)
	}
	return q.changeLease(r, func(e index.Entry, now int64) *record {
		if q.opts.MaxDeliveries > 0 && int(e.Deliveries) >= q.opts.MaxDeliveries {
			return &record{Op: opDead, Seq: e.Seq, Lease: e.Lease, At: now,
				Reason: fmt.Sprintf("%d deliveries; last: nacked", e.Deliveries)}
		}
		rec := &record{Op: opNack, Seq: e.Seq, Lease: e.Lease, At: now}
		if delay > 0 {
			rec.Due = now + int64(delay)
		}
		return rec
	})
}

// Extend sets the lease of the delivery r to run out d from now.
func (q *Queue) Extend(r Receipt, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: lease extension %v is not positive", ErrInvalidOptions, d)
	}
	return q.changeLease(r, func(e index.Entry, now int64) *record {
		return &record{Op: opExtend, Seq: e.Seq, Lease: e.Lease, At: now, Due: now + int64(d)}
	})
}

// DeadLetter moves the message of the delivery r to the dead-letter set.
func (q *Queue) DeadLetter(r Receipt, reason string) error {
	return q.changeLease(r, func(e index.Entry, now int64) *record {
		return &record{Op: opDead, Seq: e.Seq, Lease: e.Lease, At: now, Reason: reason}
	})
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

// receiptOf returns the receipt of the delivery in flight for id.
func (q *Queue) receiptOf(id string) (Receipt, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return Receipt{}, ErrClosed
	}
	e, ok := q.mu.st.table.GetByID(id)
	if !ok || e.State != index.Leased {
		return Receipt{}, fmt.Errorf("%w: no delivery of %q in flight", ErrNotFound, id)
	}
	return Receipt{Seq: e.Seq, Lease: e.Lease}, nil
}

// changeLease appends the record that mk builds for the entry that r's
// lease still owns, and waits for it.
func (q *Queue) changeLease(r Receipt, mk func(e index.Entry, now int64) *record) error {
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	now := q.now()
	e, err := q.mu.st.leased(r.Seq, r.Lease, now)
	if err != nil {
		q.mu.Unlock()
		return err
	}
	rec := mk(e, now)
	c, err := q.appendLocked(rec, nil)
	q.mu.Unlock()
	if err != nil {
		return err
	}
	if rec.Op == opExtend {
		q.mu.Lock()
		q.noteLeaseLocked(rec.Due)
		q.mu.Unlock()
	}
	if err := wait(c); err != nil {
		return err
	}
	q.noteSettled(e, rec)
	if rec.Op == opNack {
		q.signal()
	}
	return nil
}
