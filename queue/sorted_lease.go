package queue

import (
	"fmt"
	"time"

	"github.com/walq/walq/index"
	"github.com/walq/walq/wal"
)

func (q *Queue) ackBatch(lease uint64) error {
	return q.changeBatch(lease, func(b index.Batch, now int64) *record {
		return &record{Op: opBatchAck, Lease: lease, At: now, Key: b.Key, Payload: batchSeqs(lease, b.Values)}
	})
}

func (q *Queue) nackBatch(lease uint64, delay time.Duration) error {
	if delay < 0 {
		return q.refused(fmt.Errorf("%w: negative nack delay %v", ErrInvalidOptions, delay))
	}
	return q.changeBatch(lease, func(b index.Batch, now int64) *record {
		r := q.returnBatch(b, now, "nacked")
		if delay > 0 {
			r.Due = delayDue(later(now, delay))
		}
		return r
	})
}

func (q *Queue) extendBatch(lease uint64, d time.Duration) error {
	if d <= 0 {
		return q.refused(fmt.Errorf("%w: lease extension %v is not positive", ErrInvalidOptions, d))
	}
	return q.changeBatch(lease, func(b index.Batch, now int64) *record {
		return &record{Op: opBatchExtend, Lease: lease, At: now, Due: later(now, d)}
	})
}

func (q *Queue) deadBatch(lease uint64, reason string) error {
	return q.changeBatch(lease, func(b index.Batch, now int64) *record {
		return &record{Op: opBatchDead, Lease: lease, At: now, Reason: reason, Key: b.Key,
			Payload: batchSeqs(lease, b.Values)}
	})
}

// returnBatch is the record that puts b's values back; it carries the
// MaxDeliveries limit so that replay decides as the live queue did.
func (q *Queue) returnBatch(b index.Batch, now int64, why string) *record {
	r := &record{Op: opBatchReturn, Lease: b.Lease, At: now}
	if q.opts.MaxDeliveries > 0 {
		r.Count = uint32(q.opts.MaxDeliveries)
		r.Reason = fmt.Sprintf("%d deliveries; last: %s", q.opts.MaxDeliveries, why)
	}
	return r
}

// changeBatch appends the record mk builds for the leased batch and waits.
// On a poisoned log it returns the poison, also for a batch whose lease
// is lost, as Settle does: a refusal would read as if the log were
// healthy.
func (q *Queue) changeBatch(lease uint64, mk func(b index.Batch, now int64) *record) error {
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	now := q.now()
	b, err := q.mu.st.leasedBatch(lease, now)
	if err != nil {
		q.mu.Unlock()
		return q.refused(err)
	}
	rec := mk(b, now)
	c, err := q.appendLocked(rec, nil)
	var dead []deadNote
	if err == nil && rec.Op == opBatchExtend {
		q.noteLeaseLocked(rec.Due)
	} else if err == nil {
		q.noteBatchDead(b, rec, &dead)
	}
	q.mu.Unlock()
	if err != nil {
		return err
	}
	if err := wait(c); err != nil {
		return err // the log is poisoned, which wakes the consumers asleep (sleepFor)
	}
	q.logDead(dead) // once durable, as Settle does
	if rec.Op != opBatchExtend {
		q.signal()
	}
	return nil
}

// expireBatchesLocked returns the values of up to max batches whose lease
// ran out, with the commit of the last record it appended (nil when none).
func (q *Queue) expireBatchesLocked(now int64, max int) (int, *wal.Commit, error) {
	expired := q.mu.st.sorted.Expired(now, max)
	var last *wal.Commit
	for i, b := range expired {
		c, err := q.appendLocked(q.returnBatch(b, now, "ack timeout"), nil)
		if err != nil {
			return i, nil, err
		}
		last = c
	}
	return len(expired), last, nil
}

// refused returns err, the refusal of a batch settle, unless the queue is
// closed (ErrClosed, as every settle answers first) or the log is
// poisoned: then the poison, which every kind of settle reports before a
// refusal of its own (see Settle).
func (q *Queue) refused(err error) error {
	if uerr := q.usable("settle"); uerr != nil {
		return uerr
	}
	return err
}
