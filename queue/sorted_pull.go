package queue

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/walq/walq/index"
	"github.com/walq/walq/wal"
)

// publish appends a publish record made at (unix ns, the queue's clock).
func (q *Queue) publish(ctx context.Context, sort []byte, key string, payload []byte, at int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(payload) > q.opts.MaxMessageSize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(payload), q.opts.MaxMessageSize)
	}
	// The payload may be cached in the index: keep a copy, not the
	// caller's buffer, which it may reuse once Publish returns.
	r := &record{Op: opPublish, Key: key, Sort: sort, At: at, Payload: bytes.Clone(payload)}
	enc := encodeRecord(nil, r)
	if err := q.checkRecordSize(len(enc)); err != nil {
		return err
	}
	q.mu.Lock()
	c, err := q.appendLocked(r, enc)
	q.mu.Unlock()
	if err != nil {
		return err
	}
	return q.waitReady(c)
}

func (s *Sorted[K]) pull(ctx context.Context, max int, block bool) ([]*Batch[K], error) {
	if max <= 0 {
		return nil, fmt.Errorf("%w: pull of %d values", ErrInvalidOptions, max)
	}
	q := s.q
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		q.waiters.Add(1)
		q.mu.Lock()
		bs, c, err := q.pullLocked(max, s.bound())
		if err != nil || len(bs) > 0 || !block {
			q.mu.Unlock()
			q.waiters.Add(-1)
			if len(bs) == 0 { // c: the dead-letterings the pull made, if any
				return nil, cmp.Or(err, waitWritten(c), ErrEmpty)
			}
			out, derr := s.deliver(bs, c)
			return out, joinErrors(err, derr)
		}
		if q.foundNothing != nil {
			q.foundNothing()
		}
		changed, d := q.mu.changed, q.untilPullableLocked(s.window)
		timed := q.noteSleepLocked(q.now(), d)
		q.mu.Unlock()
		err = waitWritten(c) // the pull's dead-letterings, before the call may return
		if err == nil {
			err = q.sleep(ctx, changed, d)
		}
		q.sleptTimed(timed)
		q.waiters.Add(-1)
		if err != nil {
			return nil, err
		}
	}
}

// bound is the largest sort key that may be pulled now: for a windowed
// queue, now minus the window; nil otherwise.
func (s *Sorted[K]) bound() []byte {
	if s.window <= 0 {
		return nil
	}
	return orderedInt(s.q.now() - int64(s.window))
}

// pulled is a batch just leased, with the payloads the index had cached
// (nil where a payload must be read from the log).
type pulled struct {
	index.Batch
	payloads [][]byte
}

// pullLocked leases whole keys, in order, until max values are taken. A
// failed append after some keys were pulled returns them with the error:
// they are leased, and are the caller's to deliver, as in leaseLocked.
// The values MaxDeliveries kept from the pull are left to the housekeeper
// to log once their records are durable (appendAtLimitLocked). The commit
// returned is that of the last record appended, pull or dead-lettering:
// the caller waits for its write.
func (q *Queue) pullLocked(max int, bound []byte) ([]pulled, *wal.Commit, error) {
	if q.mu.closed {
		return nil, nil, ErrClosed
	}
	sq := q.mu.st.sorted
	now := q.now()
	sq.Release(now)
	deadline := later(now, q.opts.AckTimeout)
	var out []pulled
	var last *wal.Commit
	var failed error
	for n := 0; n < max; {
		key, sort, ok := sq.Next()
		if !ok || (bound != nil && bytes.Compare(sort, bound) > 0) {
			break
		}
		if dead, err := q.killPastLimitLocked(key, now); err != nil || dead != nil {
			last = cmp.Or(dead, last) // a later group: its write covers the pulls before it
			if err != nil {
				failed = err
				break
			}
			continue // the key's place may have moved, or it has no value left
		}
		lsn, c, err := q.appendLSNLocked(&record{Op: opPull, Key: key, At: now, Due: deadline}, nil)
		if err != nil {
			failed = err
			break
		}
		b, _ := sq.Batch(lsn)
		p := pulled{Batch: b, payloads: make([][]byte, len(b.Values))}
		for i, v := range b.Values {
			p.payloads[i], _ = sq.Cached(v.Seq)
		}
		out, last, n = append(out, p), c, n+len(b.Values)
	}
	if len(out) > 0 {
		q.noteLeaseLocked(deadline)
	}
	if len(out) == 0 && failed == nil {
		failed = q.poisonErr("pull") // as leaseLocked: nothing to pull is not ErrEmpty on a poisoned log
	}
	return out, last, failed
}

// untilPullableLocked returns how long until a key may become pullable by
// time alone (a hold ends, or, windowed, the first key's window closes),
// or -1 when only a publish or a returned batch can make one pullable.
func (q *Queue) untilPullableLocked(window time.Duration) time.Duration {
	sq, now := q.mu.st.sorted, q.now()
	at, ok := sq.NextHold()
	if _, sort, found := sq.Next(); found && window > 0 {
		if t, err := orderedIntValue(sort); err == nil && (!ok || later(t, window) < at) {
			at, ok = later(t, window), true
		}
	}
	if !ok {
		return -1
	}
	return max(0, time.Duration(at-now))
}

// deliver waits until the pulls are written (as Dequeue does) and fills
// the payloads not cached. It returns the batches whose values it could
// all read (nil batches when none), with a *ReadError for each batch it
// cannot read, joined (errors.Join): such a batch stays leased, and the
// other keys pulled by the same call go to the caller, not back to the
// queue a delivery older.
func (s *Sorted[K]) deliver(bs []pulled, c *wal.Commit) ([]*Batch[K], error) {
	if err := waitWritten(c); err != nil {
		return nil, err
	}
	out := make([]*Batch[K], 0, len(bs))
	var errs []error
	for _, b := range bs {
		pb, err := s.batch(b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, pb)
	}
	if len(out) == 0 {
		return nil, errors.Join(errs...) // nil, not empty: no batch was delivered
	}
	return out, errors.Join(errs...)
}

// batch makes the Batch of b, reading the payloads not cached; a value it
// cannot read fails it with a *ReadError naming the batch.
func (s *Sorted[K]) batch(b pulled) (*Batch[K], error) {
	ownPayloads(b.payloads)
	pb := &Batch[K]{Key: b.Key, Receipt: BatchReceipt{Lease: b.Lease, At: b.At}, PulledAt: time.Unix(0, b.At), q: s.q,
		Values: make([]Value[K], len(b.Values))}
	for j, v := range b.Values {
		val, err := s.leasedValue(b.Lease, v, b.payloads[j])
		if err != nil {
			return nil, &ReadError{Seq: v.Seq, Key: b.Key, Receipt: pb.Receipt, Err: err}
		}
		pb.Values[j] = val
	}
	return pb, nil
}

// ownPayloads replaces the payloads the index had cached (nil: read from
// the log) with copies in one allocation per batch: the consumer owns what
// it is handed, as it owns a Message's payload, and may write into it,
// while the cache keeps the bytes a later delivery must carry. Each copy's
// capacity ends at its length, so an append to one never writes into the
// next.
func ownPayloads(ps [][]byte) {
	n := 0
	for _, p := range ps {
		n += len(p)
	}
	if n == 0 {
		return
	}
	buf := make([]byte, 0, n)
	for i, p := range ps {
		if p == nil {
			continue
		}
		start := len(buf)
		buf = append(buf, p...)
		ps[i] = buf[start:len(buf):len(buf)]
	}
}

// leasedValue is value for the value v of the batch leased as lease. A
// compaction may copy it forward and cut the log behind it between the
// pull and the read: the read then follows the copy.
func (s *Sorted[K]) leasedValue(lease uint64, v index.SortedValue, payload []byte) (Value[K], error) {
	var val Value[K]
	err := s.q.follow(v.Loc, func(uint64) error {
		var err error
		val, err = s.value(v, payload)
		return err
	}, func() (uint64, bool) {
		s.q.mu.Lock()
		cur, ok := s.q.mu.st.sorted.LeasedValue(lease, v.Seq)
		s.q.mu.Unlock()
		if ok && cur.Loc > v.Loc {
			v = cur
		}
		return cur.Loc, ok
	})
	return val, err
}

func (s *Sorted[K]) value(v index.SortedValue, payload []byte) (Value[K], error) {
	sort, err := decodeSort[K](v.Sort)
	if err != nil {
		return Value[K]{}, err
	}
	out := Value[K]{Sort: sort, Payload: payload, PublishedAt: time.Unix(0, v.At), Deliveries: int(v.Deliveries)}
	if out.Payload == nil {
		r, err := s.q.readRecord(v.Loc)
		if err == nil {
			err = checkValueRecord(r, v)
		}
		if err != nil {
			return Value[K]{}, err
		}
		out.Payload = r.Payload
	}
	return out, nil
}

// checkValueRecord checks that r, read at v.Loc, holds v's payload: its
// publish record (v.Loc is v.Seq until a move) or its copy forward. Any
// other record there is damage, never a payload to deliver.
func checkValueRecord(r *record, v index.SortedValue) error {
	if (r.Op == opPublish && v.Loc == v.Seq) || (r.Op == opMove && r.Flags&flagSorted != 0 && r.Seq == v.Seq) {
		return nil
	}
	return withWayOut(fmt.Errorf("%w: the record at LSN %d is %s, not the payload of value %d",
		ErrCorrupt, v.Loc, recordOf(r, v.Loc), v.Seq))
}
