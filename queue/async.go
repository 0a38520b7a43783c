package queue

import (
	"cmp"
	"context"
	"errors"

	"github.com/walq/walq/wal"
)

// Pending is the outcome of an asynchronous call (EnqueueAsync,
// SettleAsync, AckAsync), known once Done is closed: the call's records
// are then as durable as the sync mode promises of a call that returned
// (SyncAlways: covered by an fsync; SyncInterval and SyncNever: written,
// safe from a crash of the process), or the call failed (see Err for what
// a failure leaves in the log). Close completes every Pending.
//
// A Pending costs no goroutine: it shares the commit of the log group that
// holds its records.
type Pending struct {
	id string      // the enqueued message's id; "" for a settle
	c  *wal.Commit // the commit of the group holding the call's last record
}

// ID returns the id of the message an EnqueueAsync enqueued, known at
// once; "" for a settle.
func (p *Pending) ID() string { return p.id }

// Done returns a channel closed once the outcome is known.
func (p *Pending) Done() <-chan struct{} { return p.c.Done() }

// Err returns nil until Done is closed; then nil if the records are
// durable, or the error that poisoned the log (a failed write or fsync:
// the queue refuses every later write, and every Pending not yet complete
// fails with the same error).
//
// An error does not mean the records are absent. They may have been
// written before the failure (a failed fsync, or a failed write of a
// later group), and even fsynced: an fsync that ends after the log was
// poisoned fails the calls it covers all the same. After a restart they
// may then be read back, the message enqueued or the ack applied, also
// after a power loss when that fsync succeeded; or they may be gone. The
// outcome is unknown, as after a crash: a producer that retries an enqueue
// after the reopen with the same producer-given id (WithID) is told
// ErrDuplicate if the first one is in the queue; one without it may
// enqueue the message twice (at least once).
func (p *Pending) Err() error {
	select {
	case <-p.c.Done():
		return wait(p.c)
	default:
		return nil
	}
}

// Wait blocks until Done is closed or ctx ends, and returns Err or the
// context's error. An outcome already known is returned whatever ctx
// says. A context that ends only stops the waiting: the records stay
// appended.
func (p *Pending) Wait(ctx context.Context) error {
	if err := awaitDone(ctx, p.c); err != nil {
		return err
	}
	return p.Err()
}

// awaitDone waits until c completes or ctx ends, and returns ctx's error
// only when c has not completed: an outcome already known wins over an
// ended context.
func awaitDone(ctx context.Context, c *wal.Commit) error {
	select {
	case <-c.Done():
		return nil
	default:
	}
	select {
	case <-c.Done():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// inflight is what the asynchronous calls appended and have not yet seen
// complete: the commits of their groups in append (LSN) order, and how many
// of their records each holds. Options.MaxPending bounds the records;
// Flush waits for the commits; a consumer with nothing to deliver waits
// for the first one not yet written that holds an enqueue, since the
// cursor reads only what is written. q.mu guards it.
type inflight struct {
	flights []flight  // oldest first; flights[:head] are done and forgotten
	head    int       // first flight not known to be done
	records int       // sum of flights[head:][i].n
	err     error     // the error of the first forgotten flight that failed; nil while none did
	last    uint64    // LSN of the last record appended by an asynchronous call; 0: none yet
	slab    []Pending // what is left of the slab the next Pendings are carved from (newPending)
}

// pendingSlab is how many Pendings one allocation makes (newPending).
const pendingSlab = 32

// newPending returns a Pending for the record with id ("" for a settle)
// whose group has commit c. Pendings are carved out of slabs of
// pendingSlab, one allocation per slab rather than per call (a Pending
// is never reused: its caller may hold it at any time). A Pending held
// keeps its slab alive (768 bytes), and with it the ids and Commits of
// the others carved from it; each Commit keeps its own slab in the log
// alive (wal's newCommitLocked, about 1.4 KiB), so one Pending held may
// keep about 45 KiB when every call of its slab had a group of its own.
func (a *inflight) newPending(id string, c *wal.Commit) *Pending {
	if len(a.slab) == 0 {
		a.slab = make([]Pending, pendingSlab)
	}
	p := &a.slab[0]
	a.slab = a.slab[1:]
	p.id, p.c = id, c
	return p
}

// flight is one commit that asynchronous calls wait for.
type flight struct {
	c     *wal.Commit
	n     int  // records of asynchronous calls in its group
	wakes bool // a record in its group may make a message ready: consumers were woken for it
}

// reap forgets the commits that completed, oldest first, keeping the
// first one's error for Flush. The slice is compacted once half of it is
// forgotten, so a reap costs O(1) amortized.
func (a *inflight) reap() {
	for ; a.head < len(a.flights); a.head++ {
		f := &a.flights[a.head]
		// A look, not a wait: Completed neither wakes the log's
		// committer (Done does, for a caller about to block) nor makes
		// a channel. Every asynchronous call reaps, and its head flight
		// is usually a group whose write is under way, or one that
		// AppendLate leaves to the next write: a wake-up here would cost
		// the call a futex, and the committer a pass for nothing.
		if !f.c.Completed() {
			break
		}
		if a.err == nil {
			a.err = wait(f.c)
		}
		a.records -= f.n
		*f = flight{}
	}
	if a.head > 0 && a.head >= len(a.flights)/2 {
		n := copy(a.flights, a.flights[a.head:])
		clear(a.flights[n:])
		a.flights, a.head = a.flights[:n], 0
	}
}

// live returns the flights not known to be done, oldest first.
func (a *inflight) live() []flight { return a.flights[a.head:] }

// push adds n records appended under commit c; wake says they may make
// messages ready once written. It reports whether c is new to the list
// as a waking flight: a consumer that went to sleep before may not know of
// c, and must look again.
func (a *inflight) push(c *wal.Commit, n int, wake bool) bool {
	a.records += n
	if k := len(a.flights); k > a.head && a.flights[k-1].c == c {
		f := &a.flights[k-1]
		f.n += n
		news := wake && !f.wakes
		f.wakes = f.wakes || wake
		return news
	}
	a.flights = append(a.flights, flight{c: c, n: n, wakes: wake})
	return wake
}

// unwritten returns the Written channel of the oldest commit not yet
// written whose group holds an enqueue (a waking flight), or nil when
// there is none. A group of settles alone makes nothing readable at the
// cursor (a nack's message is ready at once, and its settle wakes the
// consumers then): a consumer that waited for its write, which under
// SyncNever and SyncInterval may come a millisecond late (AppendLate),
// would only look again for nothing. Groups are written in LSN order, so
// the write of a waking flight comes after those of the settles' before
// it.
func (a *inflight) unwritten() <-chan struct{} {
	for _, f := range a.live() {
		if !f.wakes {
			continue
		}
		select {
		case <-f.c.Written():
		default:
			return f.c.Written()
		}
	}
	return nil
}

// reserveLocked waits until n more records fit in the MaxPending window
// (a call larger than the window waits until it is empty), and reports
// whether it had to wait. While it waits it releases q.mu, so the caller
// must check the state after it returns.
func (q *Queue) reserveLocked(ctx context.Context, n int) (waited bool, err error) {
	for ; ; waited = true {
		if q.mu.closed {
			return waited, ErrClosed
		}
		a := &q.mu.async
		a.reap()
		if a.records == 0 || a.records+n <= q.opts.MaxPending {
			return waited, nil
		}
		done := a.live()[0].c.Done()
		q.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			q.mu.Lock()
			return true, ctx.Err()
		}
		q.mu.Lock()
	}
}

// errWaited is enqueueAsync's report that it waited for room in the
// window and appended nothing: the record, stamped before the wait, is
// stamped again and appended on the next try.
var errWaited = errors.New("queue: waited for the MaxPending window")

// pushAsyncLocked records n asynchronous records appended under c. When
// wake is set (they may make messages ready once written) and c was not
// yet a waking flight, consumers asleep look again: one that slept with no
// unwritten waking commit to wait for would not learn of c's write. A group that
// a settle entered first (no wake) and an enqueue joined wakes them at the
// enqueue's push.
func (q *Queue) pushAsyncLocked(c *wal.Commit, n int, wake bool) {
	q.mu.async.last = q.log.LastLSN() // appends are made under q.mu: the call's last record
	if q.mu.async.push(c, n, wake) && q.waiters.Load() > 0 {
		q.broadcastLocked()
	}
}

// asyncWrittenLocked is what a consumer that finds nothing to deliver
// waits for besides a signal: the write of the oldest asynchronous group
// not yet written that holds an enqueue, nil when none (unwritten). The
// consumer must take it before it looks at the cursor: the committer
// writes without q.mu, and a group written between the look and this call
// would be skipped here although the look did not see its records,
// leaving nothing to wake the consumer.
func (q *Queue) asyncWrittenLocked() <-chan struct{} {
	q.mu.async.reap()
	return q.mu.async.unwritten()
}

// EnqueueAsync adds a message like Enqueue but returns without waiting for
// its commit: the Pending reports when the message is as durable as the
// sync mode promises, or the error that kept it from being so. The id is
// known at once (Pending.ID). An error returned at once (ErrDuplicate,
// ErrTooLarge, ErrClosed, the context's) means nothing was appended.
//
// At most Options.MaxPending records of asynchronous calls are in flight;
// EnqueueAsync blocks while the window is full, until the oldest commit
// completes or ctx ends. It also blocks while an enqueue in flight holds
// its producer-given id, until that one's outcome is known or ctx ends
// (see WithID). When ctx ends during either wait, it returns the
// context's error and appends nothing; after Close it returns ErrClosed.
// A call that waited is stamped when it is appended: its EnqueuedAt, and
// the start of its Delay, do not count the wait.
// Messages are appended in call order; consumers see a message once it is
// written. Flush waits for every call that returned its Pending before
// Flush was called.
//
// If the process dies before the Pending completes, the message may or may
// not be in the queue after recovery; once it completed without error it
// is there, like a message whose Enqueue returned. One that completed with
// an error may be there too (see Pending.Err).
func (q *Queue) EnqueueAsync(ctx context.Context, payload []byte, opts ...EnqueueOption) (*Pending, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// As Enqueue: the record lives on the stack, a small one is encoded
	// under q.mu into the queue's own buffer, a larger one before, into
	// a pooled buffer; the log copies either.
	var r record
	small := true // isSmall of an item without options
	if len(opts) > 0 {
		it := withOptions(payload, opts)
		if err := q.prepare(&it, q.now(), &r); err != nil {
			return nil, err
		}
		small = isSmall(&it)
	} else {
		if err := q.checkPayload(payload); err != nil {
			return nil, err
		}
		r = record{Op: opEnqueue, At: q.now(), ID: newID(), Payload: payload}
	}
	p, err := q.enqueueAsync(ctx, &r, small)
	for err != nil {
		if err != errWaited {
			if err = q.awaitHeld(ctx, err); err != nil {
				break
			}
		}
		// It waited (for the window, or for the enqueue holding its id):
		// its time is when it is accepted, not when it was called, so
		// that its EnqueuedAt and its Delay do not count the wait.
		it := withOptions(payload, opts)
		if err = q.stampAgain(&it, q.now(), &r); err != nil {
			break
		}
		p, err = q.enqueueAsync(ctx, &r, small)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// enqueueAsync appends the enqueue record r if the window has room, and
// returns its Pending; else it waits for room and returns errWaited. A
// small record is encoded under q.mu, a larger one before, into a pooled
// buffer, as Enqueue's (enqueueRecord).
func (q *Queue) enqueueAsync(ctx context.Context, r *record, small bool) (*Pending, error) {
	if small {
		return q.enqueueAsyncEnc(ctx, r, nil)
	}
	buf := q.encBufs.get()
	defer q.encBufs.put(buf)
	*buf = encodeRecord(*buf, r)
	if err := q.checkRecordSize(len(*buf)); err != nil {
		return nil, err
	}
	return q.enqueueAsyncEnc(ctx, r, *buf)
}

// enqueueAsyncEnc is enqueueAsync for r encoded as enc; nil: encoded by
// appendLocked.
func (q *Queue) enqueueAsyncEnc(ctx context.Context, r *record, enc []byte) (*Pending, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if waited, err := q.reserveLocked(ctx, 1); err != nil || waited {
		return nil, cmp.Or(err, errWaited)
	}
	if err := q.checkIDLocked(r); err != nil {
		return nil, err
	}
	q.mu.noWait = true
	c, err := q.appendLocked(r, enc)
	q.mu.noWait = false
	if err != nil {
		return nil, err
	}
	q.pushAsyncLocked(c, 1, true)
	return q.mu.async.newPending(r.ID, c), nil
}

// Flush waits until every asynchronous call that returned its Pending
// before Flush was called has completed, or ctx ends. A call still blocked
// then (on the MaxPending window, or on an id an enqueue in flight holds)
// is not waited for: wait for its own Pending. It returns the context's
// error only when a call it waits for had not completed (as Pending.Wait:
// a known outcome wins over an ended context). It returns nil when all of
// them succeeded, else the error that poisoned the log (every call in
// flight then failed with it). It reports the asynchronous calls only:
// under SyncAlways a log poisoned by a synchronous call after they
// completed does not fail it, as they stay durable. Under SyncInterval and
// SyncNever a call completes once written, before an fsync covers it: if
// the log is poisoned while the records of an asynchronous call (any made
// since Open) are not all covered by an fsync, Flush returns that error,
// this time and every later time, since they may be lost (after a failed
// fsync the kernel may drop written pages). It cannot tell a failed fsync
// from a failed write, which loses nothing written before it, and reports
// both.
func (q *Queue) Flush(ctx context.Context) error {
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	q.mu.async.reap()
	failed := q.mu.async.err
	last := q.mu.async.last
	fs := append([]flight(nil), q.mu.async.live()...)
	q.mu.Unlock()
	if q.flushing != nil {
		q.flushing(fs)
	}
	for _, f := range fs {
		if err := awaitDone(ctx, f.c); err != nil {
			return err
		}
		if err := wait(f.c); err != nil {
			return err
		}
	}
	if failed == nil {
		failed = q.unsyncedFailure(last)
	}
	return failed
}

// unsyncedFailure returns, when the sync mode is not SyncAlways, the error
// that poisoned the log if records up to last (the asynchronous calls')
// are not all covered by an fsync; else nil.
func (q *Queue) unsyncedFailure(last uint64) error {
	if q.opts.Sync == SyncAlways || last <= q.log.DurableLSN() {
		return nil
	}
	return q.log.Err()
}
