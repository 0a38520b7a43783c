package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/walq/walq/index"
	"github.com/walq/walq/wal"
)

// SettleOp is what a Settlement does with a delivery.
type SettleOp uint8

// The settle operations.
const (
	SettleAck        SettleOp = iota + 1 // remove the message for good (Ack)
	SettleNack                           // give it back, ready after Delay (Nack)
	SettleExtend                         // make the lease run out Delay from now (Extend)
	SettleDeadLetter                     // move it to the dead-letter set with Reason (DeadLetter)
)

// Settlement is one ack, nack, extend or dead-letter of a delivery, for
// Settle and SettleAsync.
type Settlement struct {
	Receipt Receipt       // the delivery
	Op      SettleOp      // what to do with it
	Delay   time.Duration // SettleNack: ready again after Delay (0: at once); SettleExtend: the lease's new length from now
	Reason  string        // SettleDeadLetter: why, kept with the dead letter
}

// BatchError is the error of a batch settle some of whose settlements
// were refused; the others were applied, in the same commit.
type BatchError struct {
	Errs []error // one per settlement, in order; nil where it was applied
}

// Error lists the settlements that failed with their index.
func (e *BatchError) Error() string {
	var b strings.Builder
	n := 0
	for i, err := range e.Errs {
		if err == nil {
			continue
		}
		if n > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "[%d] %v", i, err)
		n++
	}
	return fmt.Sprintf("queue: %d of %d in the batch failed: %s", n, len(e.Errs), b.String())
}

// Unwrap returns the errors of the settlements that failed, so that
// errors.Is(err, ErrLeaseLost) tells whether any failed for that reason.
func (e *BatchError) Unwrap() []error {
	var out []error
	for _, err := range e.Errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// Settle applies the settlements in order, as if each were its own Ack,
// Nack, Extend or DeadLetter call, but in one commit: one write and, under
// SyncAlways, one fsync for all of them. It returns when the commit is as
// durable as the sync mode promises.
//
// Each settlement is checked on its own: one whose receipt no longer owns
// its message (ErrLeaseLost) or whose arguments are invalid is refused and
// changes nothing, and the others are applied. The error is then a
// *BatchError whose Errs names each refused settlement. Any other error (a
// failed write or fsync, which poisons the queue, or ErrClosed) means none
// of them is known to be settled; after a crash, a settlement not durable
// yet is undone, which only means a redelivery. Once the queue is
// poisoned every settle fails with its error, also one whose settlements
// would have been refused, and one with none (which is nil on a healthy
// queue, ErrClosed on a closed one). Its dead-letterings are logged
// (Options.Logger) once the commit is as durable as the sync mode
// promises, and not at all when it failed.
func (q *Queue) Settle(ss ...Settlement) error {
	q.mu.Lock()
	res, err := q.settleLocked(ss)
	q.mu.Unlock()
	if err != nil {
		return err
	}
	if err := wait(res.last); err != nil {
		return err // the log is poisoned, which wakes the consumers asleep (sleepFor)
	}
	q.logDead(res.dead) // once durable: a power loss may undo a commit that failed
	if res.ready {
		q.signal()
	}
	return res.err()
}

// SettleAsync is Settle that returns without waiting for the commit: the
// Pending reports when the settlements applied are as durable as the sync
// mode promises. Refused settlements are known at once, as a *BatchError,
// next to a Pending for the others (nil when none was applied).
//
// The message of an applied ack or dead-letter is gone from the queue at
// once: no consumer gets it again while the process runs. If the process
// dies or the machine loses power before the Pending completes, the
// settlement may be undone by recovery: the message is then delivered
// again (at least once). Once the Pending completed without error, a kill
// of the process never undoes it; a power loss does not either under
// SyncAlways (under SyncInterval and SyncNever it may, within the mode's
// bound). Once it completed with an error, recovery may undo the
// settlement or keep it: the record may have been written before the
// failure, and even fsynced (see Pending.Err). SettleAsync blocks while the
// Options.MaxPending window is full; after Close it returns ErrClosed.
// It takes no context, as its wait has an end: each time the oldest
// asynchronous call in flight completes it looks again, and a failed
// write or fsync completes every call in flight (it then returns the error
// that poisoned the log, applying nothing), as Close does (it then returns
// ErrClosed). It waits as long as the log's writes and fsyncs take, as
// Settle does, and forever only if one of them never returns.
//
// Under SyncNever and SyncInterval its records are usually written with
// the next delivery's lease, whose call writes them anyway: while that
// happens, the log's committer is not woken for each settle, and writes
// what no call wrote a millisecond later at most (wal.Log.AppendLate).
// Until they are written a kill of the process undoes the settlement, as
// under every mode before the Pending completes. Done, Err, Wait and
// Flush wake the committer to write them at once.
func (q *Queue) SettleAsync(ss ...Settlement) (*Pending, error) {
	var dead []deadNote
	defer func() { q.logDead(dead) }() // runs after the Unlock below
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, err := q.reserveLocked(context.Background(), len(ss)); err != nil {
		return nil, err
	}
	q.mu.noWait, q.mu.late = true, true
	res, err := q.settleLocked(ss)
	q.mu.noWait, q.mu.late = false, false
	dead = res.dead
	if err != nil {
		return nil, err
	}
	var p *Pending
	if res.n > 0 {
		p = q.mu.async.newPending("", res.last)
		q.pushAsyncLocked(res.last, res.n, false)
	}
	if res.ready && q.waiters.Load() > 0 {
		q.broadcastLocked()
	}
	return p, res.err()
}

// AckBatch acks the deliveries in one commit; see Settle.
func (q *Queue) AckBatch(rs ...Receipt) error {
	return q.Settle(settlements(rs, SettleAck, 0)...)
}

// NackBatch nacks the deliveries with the same delay in one commit; see
// Settle.
func (q *Queue) NackBatch(delay time.Duration, rs ...Receipt) error {
	return q.Settle(settlements(rs, SettleNack, delay)...)
}

// ExtendBatch extends the leases of the deliveries to run out d from now,
// in one commit; see Settle.
func (q *Queue) ExtendBatch(d time.Duration, rs ...Receipt) error {
	return q.Settle(settlements(rs, SettleExtend, d)...)
}

// AckAsync is Ack without waiting for the commit; see SettleAsync.
func (q *Queue) AckAsync(r Receipt) (*Pending, error) {
	return one(q.SettleAsync(Settlement{Receipt: r, Op: SettleAck}))
}

// settlements makes one settlement of op per receipt.
func settlements(rs []Receipt, op SettleOp, d time.Duration) []Settlement {
	ss := make([]Settlement, len(rs))
	for i, r := range rs {
		ss[i] = Settlement{Receipt: r, Op: op, Delay: d}
	}
	return ss
}

// one turns the outcome of a settle of one settlement into that
// settlement's own error.
func one(p *Pending, err error) (*Pending, error) {
	if err == nil {
		return p, nil // before be, which escapes: no allocation per call
	}
	var be *BatchError
	if errors.As(err, &be) && len(be.Errs) == 1 {
		err = be.Errs[0]
	}
	return p, err
}

// settled is what settleLocked did.
type settled struct {
	errs  []error     // per settlement, nil where applied; nil when all were
	last  *wal.Commit // the commit of the last record appended; nil when none
	n     int         // records appended
	ready bool        // a nack made a message ready
	dead  []deadNote  // dead-letterings, to log without q.mu
}

// err returns the refusals as a *BatchError, or nil.
func (s *settled) err() error {
	if s.errs == nil {
		return nil
	}
	return &BatchError{Errs: s.errs}
}

// settleLocked appends the record of each settlement that its receipt's
// lease still allows. A refused settlement is noted and skipped; an error
// that stops the log (ErrClosed, a poisoned log) is returned, also when
// the settlement that met it was refused for a reason of its own.
func (q *Queue) settleLocked(ss []Settlement) (settled, error) {
	var out settled
	if q.mu.closed {
		return out, ErrClosed
	}
	if err := q.poisonErr("settle"); err != nil {
		return out, err // also for no settlement at all: nil would read as a healthy log
	}
	now := q.now()
	for i, s := range ss {
		c, err := q.settleOneLocked(s, now, &out)
		if err != nil {
			if lerr := q.log.Err(); lerr != nil {
				return out, poisoned(err, lerr)
			}
		}
		if err != nil {
			if out.errs == nil {
				out.errs = make([]error, len(ss))
			}
			out.errs[i] = err
			continue
		}
		out.last, out.n = c, out.n+1
		out.ready = out.ready || s.Op == SettleNack
	}
	return out, nil
}

// poisoned returns err, the error of a settlement made on a log that lerr
// poisoned, if it is lerr's (the append failed), else lerr: a refusal
// would read as if the other settlements had been applied.
func poisoned(err, lerr error) error {
	if errors.Is(err, lerr) {
		return err
	}
	return fmt.Errorf("queue: settle: %w", lerr)
}

// settleOneLocked checks one settlement against the state and appends its
// record.
func (q *Queue) settleOneLocked(s Settlement, now int64, out *settled) (*wal.Commit, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	e, err := q.mu.st.leasedBy(s.Receipt, now)
	if err != nil {
		return nil, err
	}
	rec := q.settleRecord(s, e, now)
	_, c, err := q.appendOfLocked(&rec, nil, &e)
	if err != nil {
		return nil, err
	}
	if rec.Op == opExtend {
		q.noteLeaseLocked(rec.Due)
	}
	q.noteSettled(e, &rec, out)
	return c, nil
}

// check validates the settlement's own fields.
func (s Settlement) check() error {
	switch {
	case s.Op == SettleNack && s.Delay < 0:
		return fmt.Errorf("%w: negative nack delay %v", ErrInvalidOptions, s.Delay)
	case s.Op == SettleExtend && s.Delay <= 0:
		return fmt.Errorf("%w: lease extension %v is not positive", ErrInvalidOptions, s.Delay)
	case s.Op < SettleAck || s.Op > SettleDeadLetter:
		return fmt.Errorf("%w: unknown settle operation %d", ErrInvalidOptions, s.Op)
	}
	return nil
}

// settleRecord builds the record that s makes of the leased entry e.
func (q *Queue) settleRecord(s Settlement, e index.Entry, now int64) record {
	rec := record{Seq: e.Seq, Lease: e.Lease, At: now}
	switch s.Op {
	case SettleAck:
		rec.Op = opAck
	case SettleNack:
		if q.pastLimit(e.Deliveries) {
			rec.Op, rec.Reason = opDead, fmt.Sprintf("%d deliveries; last: nacked", e.Deliveries)
			break
		}
		rec.Op = opNack
		if s.Delay > 0 {
			rec.Due = delayDue(later(now, s.Delay))
		}
	case SettleExtend:
		rec.Op, rec.Due = opExtend, later(now, s.Delay)
	case SettleDeadLetter:
		rec.Op, rec.Reason = opDead, s.Reason
	}
	return rec
}

// Messages is what DequeueBatch returns: deliveries from one queue that
// can be settled together, in one commit.
type Messages []*Message

// Receipts returns the messages' receipts, in order.
func (ms Messages) Receipts() []Receipt {
	rs := make([]Receipt, len(ms))
	for i, m := range ms {
		rs[i] = m.Receipt
	}
	return rs
}

// Ack acks every message in one commit; see Queue.Settle for the error.
func (ms Messages) Ack() error { return ms.settle(SettleAck, 0) }

// Nack gives every message back, ready after delay, in one commit.
func (ms Messages) Nack(delay time.Duration) error { return ms.settle(SettleNack, delay) }

// Extend makes every lease run out d from now, in one commit.
func (ms Messages) Extend(d time.Duration) error { return ms.settle(SettleExtend, d) }

// AckAsync acks every message without waiting for the commit; see
// Queue.SettleAsync. With no messages it returns (nil, nil). Only the
// embedded queue settles asynchronously: messages of another engine fail
// with errors.ErrUnsupported, as Message.AckAsync does (use Ack).
func (ms Messages) AckAsync() (*Pending, error) {
	if len(ms) > 0 && ms[0].q == nil {
		return ms[0].AckAsync()
	}
	q, err := ms.queue()
	if q == nil || err != nil {
		return nil, err
	}
	return q.SettleAsync(settlements(ms.Receipts(), SettleAck, 0)...)
}

func (ms Messages) settle(op SettleOp, d time.Duration) error {
	if len(ms) > 0 && ms[0].q == nil {
		return ms.settleEach(op, d)
	}
	q, err := ms.queue()
	if q == nil || err != nil {
		return err
	}
	return q.Settle(settlements(ms.Receipts(), op, d)...)
}

// settleEach settles messages of another engine (NewMessage) one by one,
// through their own methods; a *BatchError names those that failed.
func (ms Messages) settleEach(op SettleOp, d time.Duration) error {
	errs := make([]error, len(ms))
	failed := false
	for i, m := range ms {
		switch op {
		case SettleAck:
			errs[i] = m.Ack()
		case SettleNack:
			errs[i] = m.Nack(d)
		case SettleExtend:
			errs[i] = m.Extend(d)
		}
		failed = failed || errs[i] != nil
	}
	if !failed {
		return nil
	}
	return &BatchError{Errs: errs}
}

// queue returns the embedded queue the messages came from; nil when there
// are none.
func (ms Messages) queue() (*Queue, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	q := ms[0].q
	for _, m := range ms {
		if m.q != q || q == nil {
			return nil, fmt.Errorf("%w: messages of different queues settled together", ErrInvalidOptions)
		}
	}
	return q, nil
}
