package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/walq/walq/wal"
)

// Dequeue returns the next ready message, leased to the caller for
// Options.AckTimeout. It blocks until a message is ready, ctx ends or the
// queue is closed; it never polls. On a poisoned log (a failed write or
// fsync) it returns no message and an error wrapping the one that
// poisoned it, at once, and a Dequeue asleep when the log is poisoned,
// whatever poisoned it, wakes to return it. The lease record is written when
// Dequeue returns, so a crash of the process while the message is being
// processed counts as a delivery. Dequeue does not wait for an fsync of
// its own: under SyncAlways the lease is fsynced with the next commit (the
// settle's of the message, at the latest). A power loss before that fsync
// takes the delivery back: the message is ready again with the delivery
// not counted, and its receipt is refused with ErrLeaseLost.
func (q *Queue) Dequeue(ctx context.Context) (*Message, error) {
	return q.dequeueOne(ctx, true)
}

// TryDequeue is Dequeue without waiting: it returns ErrEmpty at once when
// no message is ready and the log is healthy. On a poisoned log it returns
// the error that poisoned it, never ErrEmpty, as Dequeue does.
func (q *Queue) TryDequeue() (*Message, error) {
	return q.dequeueOne(context.Background(), false)
}

// DequeueBatch leases up to max ready messages, blocking until at least one
// is ready, ctx ends or the queue is closed. On a poisoned log it returns
// no message and the error that poisoned it, as Dequeue does.
//
// A message whose payload cannot be read is not returned; the others of
// the batch are, with an error (ErrCorrupt, or another read error) that
// holds a *ReadError naming it: process the messages, settle them as
// usual, then handle the error (a caller that drops them on any error
// has them back at the end of their lease, each with one delivery more).
// The unreadable message stays leased until AckTimeout, then comes back
// and is dead-lettered at MaxDeliveries, unless the caller dead-letters
// it first (DeadLetter with the ReadError's Delivery).
func (q *Queue) DequeueBatch(ctx context.Context, max int) (Messages, error) {
	ds, err := q.dequeue(ctx, max, true, nil)
	if len(ds) == 0 {
		return nil, err
	}
	out := make(Messages, len(ds))
	for i, d := range ds {
		out[i] = d.m
	}
	return out, err
}

// A ReadError is a delivery's failure to read one message's payload
// (Dequeue, TryDequeue, DequeueBatch) or one value of a sorted batch
// (Pull, TryPull). What it names is leased all the same, until
// AckTimeout, so that it is not delivered again at once: dead-letter it
// with the failed delivery's receipt (Queue.DeadLetter with Delivery,
// Sorted.DeadLetter with Receipt), or let its lease run out, after which
// it is delivered again and dead-lettered at MaxDeliveries. Get it with
// errors.As; errors.Is sees Err (ErrCorrupt, or another read error). A
// delivery that cannot read several joins a ReadError for each
// (errors.Join): ReadErrors returns them all.
//
// Both receipts are fenced: they name the delivery that failed, and once
// its lease has ended (the message or batch was requeued, and may have
// been delivered and read elsewhere after a transient error) they are
// refused with ErrLeaseLost and change nothing. DeadLetterID with ID is
// not fenced: it takes the message from whichever delivery holds it now.
// Sorted.DeadLetter with Receipt dead-letters the key's whole batch, its
// readable values too. Requeueing a damaged dead letter or value is
// refused (see RequeueDead); repair the directory first (walq repair), or
// purge it.
type ReadError struct {
	ID       string       // the message's id; "" for a sorted batch
	Seq      uint64       // the message's, or the sorted value's, sequence number
	Key      string       // the sorted batch's key; "" for a message
	Delivery Receipt      // the message's failed delivery, for Queue.DeadLetter; zero for a sorted batch
	Receipt  BatchReceipt // the sorted batch's failed pull, for Sorted.DeadLetter; zero for a message
	Err      error        // why it could not be read
}

func (e *ReadError) Error() string {
	if e.ID != "" {
		return fmt.Sprintf("queue: message %s (seq %d) not delivered: %v", e.ID, e.Seq, e.Err)
	}
	return fmt.Sprintf("queue: sorted batch of key %q (value seq %d, receipt %s) not delivered: %v",
		e.Key, e.Seq, e.Receipt, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// ReadErrors returns every *ReadError in err's tree, in the order
// errors.As would meet them: it walks both Unwrap() error and Unwrap()
// []error, so it finds them inside a join of joins, or under a caller's
// own wrapping (fmt.Errorf with %w, errors.Join). It does not look inside
// a ReadError. It returns nil when there is none.
func ReadErrors(err error) []*ReadError {
	var out []*ReadError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case *ReadError:
			out = append(out, e)
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		case interface{ Unwrap() []error }:
			for _, c := range e.Unwrap() {
				walk(c)
			}
		}
	}
	walk(err)
	return out
}

// dequeueOne leases and delivers one message; its delivery lives on the
// stack, so the Message is the only allocation of the queue's own.
func (q *Queue) dequeueOne(ctx context.Context, block bool) (*Message, error) {
	var buf [1]delivery
	ds, err := q.dequeue(ctx, 1, block, buf[:0])
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	return ds[0].m, nil
}

// delivery is a message leased under the lock whose payload may still have
// to be read from the log.
type delivery struct {
	m   *Message
	loc uint64 // LSN of the payload's record; 0 when m.Payload is filled
}

// dequeue leases up to max messages, appended to buf, and delivers them:
// it returns once their lease records are written and their payloads
// read.
//
// A consumer counts itself among the waiters (whom a write that may make
// a message ready must wake) only once a first look found nothing, and
// then looks again: a consumer that finds a message at once costs the
// producers nothing. The count is raised under q.mu before the second
// look, so a message written after that look finds it counted.
func (q *Queue) dequeue(ctx context.Context, max int, block bool, buf []delivery) ([]delivery, error) {
	if max <= 0 {
		return nil, fmt.Errorf("%w: dequeue of %d messages", ErrInvalidOptions, max)
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		q.mu.Lock()
		now := q.now() // one reading for both looks and the wait
		ds, c, err := q.leaseLocked(max, buf, now)
		if err != nil || len(ds) > 0 || !block {
			q.mu.Unlock()
			return q.delivered(ds, c, err)
		}
		if q.foundNothing != nil {
			q.foundNothing() // the gap before the count is raised
		}
		q.waiters.Add(1)
		// A group of asynchronous records is written without q.mu and
		// then readable at the cursor: what to wait for is taken before
		// looking, so a write that lands while we look still wakes us.
		written := q.asyncWrittenLocked()
		dead := c // the first look's dead-letterings, if any
		ds, c, err = q.leaseLocked(max, buf, now)
		if c = cmp.Or(c, dead); err != nil || len(ds) > 0 {
			q.mu.Unlock()
			q.waiters.Add(-1)
			return q.delivered(ds, c, err)
		}
		if q.foundNothing != nil {
			q.foundNothing()
		}
		changed, due := q.mu.changed, q.untilDueLocked(now)
		timed := q.noteSleepLocked(now, due)
		q.mu.Unlock()
		err = waitWritten(c) // the looks' dead-letterings, before the call may return
		if err == nil {
			err = q.sleepFor(ctx, changed, written, due)
		}
		q.sleptTimed(timed)
		q.waiters.Add(-1)
		if err != nil {
			return nil, err
		}
	}
}

// delivered ends a look that leased ds under c, and failed with err after
// them if err is set: it delivers them (with err, and with the error of
// their delivery if that fails too), or reports err, or ErrEmpty, when
// there were none.
func (q *Queue) delivered(ds []delivery, c *wal.Commit, err error) ([]delivery, error) {
	if len(ds) == 0 { // c: the dead-letterings the look made, if any
		return nil, cmp.Or(err, waitWritten(c), ErrEmpty)
	}
	out, rerr := q.deliver(ds, c)
	return out, joinErrors(err, rerr)
}

// joinErrors reports both a and b when both are set (a look that failed
// after leasing, and a write or read of what it leased that failed too),
// else the one that is.
func joinErrors(a, b error) error {
	if a != nil && b != nil {
		return errors.Join(a, b)
	}
	return cmp.Or(a, b)
}

// untilDueLocked returns how long after now until the next delayed message
// is due, or -1 when none is delayed.
func (q *Queue) untilDueLocked(now int64) time.Duration {
	due, ok := q.mu.st.table.NextDue()
	if !ok {
		return -1
	}
	return max(0, time.Duration(due-now))
}

// sleep waits until changed is closed, d passes (d >= 0), or ctx ends.
// The caller noted d (noteSleepLocked): once a forward step of the wall
// clock brings what it waits for, the housekeeper closes changed.
func (q *Queue) sleep(ctx context.Context, changed <-chan struct{}, d time.Duration) error {
	return q.sleepFor(ctx, changed, nil, d)
}

// sleepFor is sleep that also ends when written (an asynchronous call's
// group being written; nil when none) is closed. Every sleep also ends
// when the log is poisoned, whatever poisoned it (a write or fsync of any
// call, or of the background syncer): the sleeper then looks again and
// reports the poison, as a look made after it does.
func (q *Queue) sleepFor(ctx context.Context, changed, written <-chan struct{}, d time.Duration) error {
	timer := q.sleepTimer(d)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-written:
	case <-timer:
	case <-q.log.Poisoned():
	}
	return nil
}

// leaseLocked leases up to max ready messages at now (the queue clock's
// reading under this hold of q.mu): those ready again or due first,
// oldest first, then never-delivered ones from the cursor. It appends
// them to out. A failure after some were leased (damage met at the
// cursor) returns them with the error: they are leased, and are the
// caller's to deliver. The ready messages that MaxDeliveries dead-letters
// on the way (leaseOneLocked) are left to the housekeeper to log once
// their records are durable (appendAtLimitLocked): the caller does not
// wait for that. The commit returned is that of the last record appended,
// lease or dead-lettering: the caller waits for its write.
func (q *Queue) leaseLocked(max int, out []delivery, now int64) ([]delivery, *wal.Commit, error) {
	if q.mu.closed {
		return nil, nil, ErrClosed
	}
	q.mu.st.table.SetNow(now)
	var last *wal.Commit
	var err error
	for len(out) < max {
		var d delivery
		var c *wal.Commit
		d, c, err = q.leaseOneLocked(now)
		last = cmp.Or(c, last)
		if err != nil || d.m == nil {
			break
		}
		out = append(out, d)
	}
	if len(out) > 0 {
		q.noteLeaseLocked(later(now, q.opts.AckTimeout))
	}
	if len(out) == 0 && err == nil {
		err = q.poisonErr("dequeue")
	}
	return out, last, err
}

// poisonErr returns the error that poisoned the log, wrapped as op's, or
// nil while the log is healthy (a check that takes no lock). A delivery
// that found nothing to lease returns it: a poisoned log takes no lease,
// and the enqueues or publishes it would wait for may never be written
// (their write failed), so the caller hears why nothing comes rather than
// ErrEmpty or a wait that never ends. A settle returns it before any
// refusal of its own.
func (q *Queue) poisonErr(op string) error {
	if err := q.log.Err(); err != nil {
		return fmt.Errorf("queue: %s: %w", op, err)
	}
	return nil
}

// usable returns ErrClosed once the queue is closed, else the error that
// poisoned the log (as poisonErr), else nil: the answer of a call given
// nothing to do, which would otherwise read as a healthy queue.
func (q *Queue) usable(op string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.usableLocked(op)
}

// usableLocked is usable with q.mu held.
func (q *Queue) usableLocked(op string) error {
	if q.mu.closed {
		return ErrClosed
	}
	return q.poisonErr(op)
}

// leaseOneLocked leases the first ready message, or else the next one at
// the cursor. A ready message that has had MaxDeliveries is not delivered
// again: it goes to the dead set (pastLimit, appendAtLimitLocked), and
// the next one is looked at.
func (q *Queue) leaseOneLocked(now int64) (delivery, *wal.Commit, error) {
	deadline := later(now, q.opts.AckTimeout)
	e, ok := q.mu.st.table.FirstReady()
	var dead *wal.Commit // the last dead-lettering's, returned unless a lease follows it
	for ok && q.pastLimit(e.Deliveries) {
		rec := q.deadAtLimit(e, now)
		note := deadNote{id: e.ID, seq: e.Seq, deliveries: e.Deliveries, reason: rec.Reason}
		c, err := q.appendAtLimitLocked(rec, &e, note)
		if err != nil {
			return delivery{}, dead, err
		}
		dead = c
		e, ok = q.mu.st.table.FirstReady()
	}
	if ok {
		lsn, c, err := q.appendOfLocked(&record{Op: opLease, Seq: e.Seq, At: now, Due: deadline}, nil, &e)
		if err != nil {
			return delivery{}, dead, err
		}
		q.obs.noteDelivery(e.Deliveries)
		m := &Message{ID: e.ID, EnqueuedAt: time.Unix(0, e.EnqueuedAt), DeliveredAt: time.Unix(0, now),
			Deliveries: int(e.Deliveries) + 1, Receipt: Receipt{Seq: e.Seq, Lease: lsn, At: now}, q: q}
		return delivery{m: m, loc: e.Loc}, c, nil
	}
	var er record
	seq, size, err := q.cursorNextLocked(&er)
	if err != nil || seq == 0 {
		return delivery{}, dead, err
	}
	m := newMessage(er.Payload) // copied before the cursor reads on
	r := &record{Op: opLease, Seq: seq, ID: er.ID, Enq: er.At, Size: uint32(size), At: now, Due: deadline}
	lsn, c, err := q.appendLSNLocked(r, nil)
	if err != nil {
		return delivery{}, dead, err
	}
	m.ID, m.Headers, m.EnqueuedAt, m.DeliveredAt = er.ID, er.Headers, time.Unix(0, er.At), time.Unix(0, now)
	m.Deliveries, m.Receipt, m.q = 1, Receipt{Seq: seq, Lease: lsn, At: now}, q
	return delivery{m: m}, c, nil
}

// cursorNextLocked reads the log from the cursor to the next enqueue record
// that the cursor owns (not delayed), decodes it into r, and returns its
// LSN and its size; LSN 0 when the written log holds none. r.Payload is a
// view into the cursor's buffer (decodeRecordAliased): valid until the
// cursor reads on.
func (q *Queue) cursorNextLocked(r *record) (uint64, int, error) {
	st := q.mu.st
	reset := false
	for {
		lsn, b, err := q.mu.cursor.Next()
		if err != nil { // looked into only when set: this runs per record
			if errors.Is(err, io.EOF) {
				return 0, 0, nil
			}
			if errors.Is(err, wal.ErrNotFound) && !reset {
				// A compaction cut the log past the reader's position: it
				// cuts only what the cursor no longer needs
				// (cursorNeedLocked). Read on from the cursor, or from the
				// log's start.
				q.resetCursorLocked()
				reset = true
				continue
			}
			return 0, 0, wrapCorrupt("read at cursor", err)
		}
		if lsn < st.cursor {
			continue // the cursor passed it: a copy forward took it (applyCursorMove)
		}
		if peekOp(b) != opEnqueue {
			st.cursor = lsn + 1
			continue
		}
		// The ID stays a view until the record is kept: a delayed one
		// skipped costs no string.
		id, err := decodeRecordAliasedID(b, r)
		if err != nil {
			return 0, 0, fmt.Errorf("queue: record at LSN %d: %w", lsn, err)
		}
		if r.Due != 0 {
			// Enqueued with a delay: the table owns it (applyEnqueue), and
			// still does or did until it was acked or purged. Asking the
			// table instead would deliver an acked one a second time.
			st.cursor = lsn + 1
			continue
		}
		if id != nil {
			r.ID = string(id)
		}
		return lsn, len(b), nil
	}
}

// deliver waits until the leases are written and reads the payloads that
// were not read under the lock. It returns the deliveries whose payload
// it has, with a *ReadError for each message it cannot read, joined
// (errors.Join): such a message stays leased, and the others, leased by
// the same call, go to the caller, not back to the queue a delivery older.
func (q *Queue) deliver(ds []delivery, c *wal.Commit) ([]delivery, error) {
	if err := waitWritten(c); err != nil {
		return nil, err
	}
	var errs []error
	out := ds[:0]
	for _, d := range ds {
		if d.loc != 0 {
			if err := q.readPayload(d.m, d.loc); err != nil {
				errs = append(errs, &ReadError{ID: d.m.ID, Seq: d.m.Receipt.Seq, Delivery: d.m.Receipt, Err: err})
				continue
			}
		}
		out = append(out, d)
	}
	return out, errors.Join(errs...)
}

// readPayload fills m's payload and headers from the record at loc. If a
// compaction moved the message meanwhile, it follows the move.
func (q *Queue) readPayload(m *Message, loc uint64) error {
	return q.followMoves(m.Receipt.Seq, loc, func(loc uint64) error {
		r, err := q.readRecord(loc)
		if err == nil {
			err = checkPayloadRecord(r, m.Receipt.Seq, loc)
		}
		if err == nil {
			m.Payload, m.Headers = r.Payload, r.Headers
		}
		return err
	})
}

// followMoves calls read with loc, where the payload of message seq was,
// and follows the copies a compaction makes of it meanwhile (follow).
func (q *Queue) followMoves(seq, loc uint64, read func(loc uint64) error) error {
	return q.follow(loc, read, func() (uint64, bool) {
		e, ok := q.indexedEntry(seq)
		return e.Loc, ok
	})
}

// checkPayloadRecord checks that r, read at loc, holds the payload of
// message seq: its enqueue record (whose LSN is the seq) or a copy of it.
// Anything else means the index and the log disagree, and a payload is
// never delivered from the wrong record.
func checkPayloadRecord(r *record, seq, loc uint64) error {
	if (r.Op == opEnqueue && loc == seq) || ((r.Op == opMove || r.Op == opMoveDead) && r.Seq == seq) {
		return nil
	}
	return withWayOut(fmt.Errorf("%w: the record at LSN %d is %s, not the payload of message %d",
		ErrCorrupt, loc, recordOf(r, loc), seq))
}

// recordOf names r, read at loc, by its op and the message it is of: an
// enqueue or publish record's message is its own LSN, any other's its Seq.
func recordOf(r *record, loc uint64) string {
	seq := r.Seq
	if r.Op == opEnqueue || r.Op == opPublish {
		seq = loc
	}
	return fmt.Sprintf("the %s record of message %d", opName(r.Op), seq)
}

// closedAs returns err, a read of a log that a Close closed meanwhile, as
// ErrClosed (keeping the log's error in the chain); any other err as it is.
func closedAs(err error) error {
	if errors.Is(err, wal.ErrClosed) && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// readRecord reads and decodes the record at lsn. A copy forward appends
// a message's copy and points the index at it before it is written: a
// read of an LSN not written yet waits for the log to write it.
func (q *Queue) readRecord(lsn uint64) (*record, error) {
	if err := q.awaitWritten(lsn); err != nil {
		return nil, closedAs(err)
	}
	b, err := q.log.Read(lsn)
	if errors.Is(err, wal.ErrClosed) {
		return nil, closedAs(fmt.Errorf("read LSN %d: %w", lsn, err))
	}
	if err != nil {
		return nil, wrapCorrupt(fmt.Sprintf("read LSN %d", lsn), err)
	}
	r := new(record)
	if err := decodeRecord(b, r); err != nil {
		return nil, fmt.Errorf("queue: record at LSN %d: %w", lsn, err)
	}
	return r, nil
}

// viewRecord is readRecord for a caller that only looks at the record:
// it calls fn with the record at lsn decoded in place (wal.Log.View), its
// Payload and Sort views into the log's entry, valid only until fn
// returns. It returns readRecord's errors, or fn's. The record is passed
// by value: nothing of it outlives the call.
func (q *Queue) viewRecord(lsn uint64, fn func(r record) error) error {
	if err := q.awaitWritten(lsn); err != nil {
		return closedAs(err)
	}
	var decodeErr, fnErr error
	err := q.log.View(lsn, func(b []byte) error {
		var r record
		if decodeErr = decodeRecordAliased(b, &r); decodeErr == nil {
			fnErr = fn(r)
		}
		return nil
	})
	switch {
	case errors.Is(err, wal.ErrClosed):
		return closedAs(fmt.Errorf("read LSN %d: %w", lsn, err))
	case err != nil:
		return wrapCorrupt(fmt.Sprintf("read LSN %d", lsn), err)
	case decodeErr != nil:
		return fmt.Errorf("queue: record at LSN %d: %w", lsn, decodeErr)
	}
	return fnErr
}

// awaitWritten waits until the log wrote lsn, if it appended it but has
// not written it yet (see readRecord).
func (q *Queue) awaitWritten(lsn uint64) error {
	if lsn > q.log.WrittenLSN() && lsn <= q.log.LastLSN() {
		if err := q.log.Flush(); err != nil {
			return fmt.Errorf("queue: read LSN %d: %w", lsn, err)
		}
	}
	return nil
}
