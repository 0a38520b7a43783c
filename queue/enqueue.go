package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/walq/walq/internal/msgid"
	"github.com/walq/walq/wal"
)

// Item is one message to enqueue with EnqueueBatch.
type Item struct {
	ID        string            // optional; generated when empty; a producer-given id takes part in dedup
	Payload   []byte            // the message body
	Headers   map[string]string // optional
	Delay     time.Duration     // optional: not delivered before now+Delay
	DeliverAt time.Time         // optional: not delivered before this time
}

// EnqueueOption sets a property of an enqueued message.
type EnqueueOption func(*Item)

// WithID sets the message id. An enqueue with the id of a live message, or
// of one acked within Options.DedupWindow, fails with ErrDuplicate. While
// the enqueue that holds the id is in flight (not yet as durable as the
// sync mode promises: fsynced under SyncAlways, written under the
// others), it waits for that one's outcome: ErrDuplicate once it is as
// durable, the error that poisoned the log if it failed; or the context's
// error if the context ends first, and then nothing is enqueued. An
// enqueue that waited and then appends its message (the holder's message
// was acked and its id forgotten meanwhile) is stamped when it appends
// it: its EnqueuedAt and the start of its Delay do not count the wait. On a
// poisoned log it fails with that error, never ErrDuplicate for an id the
// queue holds. An EnqueueBatch that repeats an id the queue does not hold
// within itself fails with ErrDuplicate, poisoned log or not, and
// enqueues none of its items.
func WithID(id string) EnqueueOption { return func(it *Item) { it.ID = id } }

// WithHeaders attaches headers to the message.
func WithHeaders(h map[string]string) EnqueueOption { return func(it *Item) { it.Headers = h } }

// WithDelay keeps the message from delivery until d has passed. A delay
// that reaches past the last instant the queue counts (the year 2262
// here) keeps it until that instant, never wraps into the past.
func WithDelay(d time.Duration) EnqueueOption { return func(it *Item) { it.Delay = d } }

// WithDeliverAt keeps the message from delivery until t, taken as the
// last instant the queue counts when t lies past it.
func WithDeliverAt(t time.Time) EnqueueOption { return func(it *Item) { it.DeliverAt = t } }

// Enqueue adds a message and returns its id. Under SyncAlways it returns
// after the message is durable.
func (q *Queue) Enqueue(ctx context.Context, payload []byte, opts ...EnqueueOption) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	// EnqueueBatch for one item, without its slices: the record lives on
	// the stack; a small one is encoded under q.mu into the queue's own
	// buffer, as every other record is (a large payload apart, copied by
	// the log from the caller's slice), a larger one before, into a
	// pooled buffer (the log copies it).
	var r record
	small := true // isSmall of an item without options
	if len(opts) > 0 {
		it := withOptions(payload, opts)
		if err := q.prepare(&it, q.now(), &r); err != nil {
			return "", fmt.Errorf("item 0: %w", err)
		}
		small = isSmall(&it)
	} else {
		// prepare's record for a bare payload, built here: on this
		// frame its stores need no write barrier.
		if err := q.checkPayload(payload); err != nil {
			return "", fmt.Errorf("item 0: %w", err)
		}
		r = record{Op: opEnqueue, At: q.now(), ID: newID(), Payload: payload}
	}
	c, err := q.enqueueRecord(&r, small)
	for err != nil {
		if err = q.awaitHeld(ctx, err); err != nil {
			break
		}
		// It waited for the enqueue holding its id (only a producer-given
		// one, so opts were given): its time is when it is appended, so
		// that its EnqueuedAt and its Delay do not count the wait.
		it := withOptions(payload, opts)
		if err = q.stampAgain(&it, q.now(), &r); err != nil {
			break
		}
		c, err = q.enqueueRecord(&r, small)
	}
	if err != nil {
		return "", err
	}
	if err := q.waitReady(c); err != nil {
		return "", err
	}
	return r.ID, nil
}

// enqueueRecord appends Enqueue's record r: a small one is encoded under
// q.mu, a larger one before, into a pooled buffer.
func (q *Queue) enqueueRecord(r *record, small bool) (*wal.Commit, error) {
	if small {
		return q.enqueueOne(r, nil)
	}
	buf := q.encBufs.get()
	*buf = encodeRecord(*buf, r)
	c, err := q.enqueueOne(r, *buf)
	q.encBufs.put(buf)
	return c, err
}

// withOptions returns the item the options make of payload. (Apart from
// Enqueue, so that an enqueue without options keeps its item on the stack.)
func withOptions(payload []byte, opts []EnqueueOption) Item {
	it := &Item{Payload: payload}
	for _, o := range opts {
		o(it)
	}
	return *it
}

// EnqueueBatch adds the items in order and returns their ids. If any id is
// a duplicate (ErrDuplicate) or any item is invalid, none is enqueued. The
// batch is one log entry under one checksum and one fsync: a crash before
// it returned keeps all of it or none, so a producer that retries it with
// the same ids enqueues each item once (ErrDuplicate: the whole batch was
// kept). Reading one of its messages back other than in order (a
// redelivery, Peek, a copy forward) reads the whole entry: keep batches to
// a few MiB. With no item it enqueues nothing, and returns nil on a
// healthy queue, ErrClosed on a closed one, and on a poisoned log the
// error that poisoned it, as an enqueue of items would.
func (q *Queue) EnqueueBatch(ctx context.Context, items []Item) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, q.usable("enqueue")
	}
	now := q.now()
	recs := make([]record, len(items))
	encs := make([][]byte, len(items))
	ids := make([]string, len(items))
	for i := range items {
		if err := q.prepare(&items[i], now, &recs[i]); err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		encs[i] = encodeRecord(nil, &recs[i])
		ids[i] = recs[i].ID
	}
	c, err := q.enqueueLocked(recs, encs)
	for err != nil {
		if err = q.awaitHeld(ctx, err); err != nil {
			break
		}
		// It waited for the enqueue holding an id: stamped again, as
		// Enqueue is.
		if err = q.stampAllAgain(items, recs, encs); err != nil {
			break
		}
		c, err = q.enqueueLocked(recs, encs)
	}
	if err != nil {
		return nil, err
	}
	if err := q.waitReady(c); err != nil {
		return nil, err
	}
	return ids, nil
}

// prepare checks an item and fills its enqueue record.
func (q *Queue) prepare(it *Item, now int64, r *record) error {
	if err := q.checkPayload(it.Payload); err != nil {
		return err
	}
	*r = record{Op: opEnqueue, ID: it.ID, At: now, Headers: it.Headers, Payload: it.Payload}
	if it.ID != "" {
		r.Flags = flagProducerID
	} else {
		r.ID = newID()
	}
	due := now // no delay; before 1970 a delay's time is negative
	if !it.DeliverAt.IsZero() {
		due = unixNano(it.DeliverAt)
	}
	if it.Delay > 0 {
		due = max(due, later(now, it.Delay))
	}
	if due > now {
		r.Due = delayDue(due)
	}
	return nil
}

// stampAgain prepares r again from it at now, keeping its id: a call
// that waited (for the enqueue holding its id, or for room in the
// MaxPending window) is stamped when it is appended, so that its
// EnqueuedAt and the start of its Delay do not count the wait.
func (q *Queue) stampAgain(it *Item, now int64, r *record) error {
	id, flags := r.ID, r.Flags
	if err := q.prepare(it, now, r); err != nil {
		return err
	}
	r.ID, r.Flags = id, flags
	return nil
}

// stampAllAgain is stampAgain for a batch, at one time, and encodes its
// records again.
func (q *Queue) stampAllAgain(items []Item, recs []record, encs [][]byte) error {
	now := q.now()
	for i := range items {
		if err := q.stampAgain(&items[i], now, &recs[i]); err != nil {
			return fmt.Errorf("item %d: %w", i, err)
		}
		encs[i] = encodeRecord(nil, &recs[i])
	}
	return nil
}

// checkPayload refuses a payload longer than Options.MaxMessageSize.
func (q *Queue) checkPayload(p []byte) error {
	if len(p) > q.opts.MaxMessageSize { // apart from the error, so that the check inlines
		return q.payloadTooLarge(p)
	}
	return nil
}

func (q *Queue) payloadTooLarge(p []byte) error {
	return fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(p), q.opts.MaxMessageSize)
}

// enqueueLocked appends the enqueue records after checking their ids, and
// returns the commit of the last.
func (q *Queue) enqueueLocked(recs []record, encs [][]byte) (*wal.Commit, error) {
	if len(recs) == 1 {
		return q.enqueueOne(&recs[0], encs[0])
	}
	for _, enc := range encs {
		if err := q.checkRecordSize(len(enc)); err != nil {
			return nil, err
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return nil, ErrClosed
	}
	if err := q.checkIDsLocked(recs); err != nil {
		return nil, err
	}
	return q.appendAllLocked(recs, encs)
}

// enqueueOne is enqueueLocked for one record, without its loops. enc nil
// has the record encoded under q.mu (appendOfLocked), which only a small
// one is (isSmall): its size check cannot fail (its payload passed
// checkPayload, its other fields are a few hundred bytes).
func (q *Queue) enqueueOne(r *record, enc []byte) (*wal.Commit, error) {
	if enc != nil {
		if err := q.checkRecordSize(len(enc)); err != nil {
			return nil, err
		}
	}
	q.mu.Lock()
	c, err := q.enqueueOneLocked(r, enc)
	q.mu.Unlock()
	return c, err
}

// enqueueOneLocked is enqueueOne's work under q.mu (apart, so that the
// lock is released without a defer; nothing in it panics but a broken
// invariant).
func (q *Queue) enqueueOneLocked(r *record, enc []byte) (*wal.Commit, error) {
	if q.mu.closed {
		return nil, ErrClosed
	}
	q.expireDedupLocked(r.At) // at every enqueue, as checkIDsLocked does
	if err := q.checkProducerIDLocked(r); err != nil {
		return nil, err
	}
	return q.appendLocked(r, enc)
}

// appendAllLocked appends the enqueue records of a batch, encoded as encs,
// as one log entry (wal.Log.AppendAll), so that a crash keeps the whole
// batch or none of it: a producer that retries the batch after the crash
// then finds every id or none, never a prefix (whose ErrDuplicate would
// drop the rest), and applies them to the state.
func (q *Queue) appendAllLocked(recs []record, encs [][]byte) (*wal.Commit, error) {
	for i := range recs {
		if err := q.appendableLocked(&recs[i], nil); err != nil {
			return nil, err
		}
	}
	first, c, err := q.log.AppendAll(encs, q.mu.noWait)
	if err != nil {
		return nil, q.appendFailed(opEnqueue, err)
	}
	for i := range recs {
		q.appliedLocked(first+uint64(i), &recs[i], len(encs[i]), nil)
		if recs[i].Flags&flagProducerID != 0 {
			q.mu.idCommit = c
		}
	}
	return c, nil
}

// maxLogRecord is the log's own limit on a record (wal.Options'
// MaxRecordSize): the largest it takes.
const maxLogRecord = 1 << 30

// checkRecordSize refuses a record of n bytes, longer than a message's payload
// limit plus 1 MiB for its other fields, headers, key or reason: every
// record but a copy forward, which may be a few bytes longer than the
// record it copies (the log itself takes up to maxLogRecord).
func (q *Queue) checkRecordSize(n int) error {
	if n > q.opts.MaxMessageSize+1<<20 { // apart from the error, so that the check inlines
		return q.recordTooLarge(n)
	}
	return nil
}

func (q *Queue) recordTooLarge(n int) error {
	limit := q.opts.MaxMessageSize + 1<<20
	return fmt.Errorf("%w: %w: a record of %d bytes with its headers, id, key or reason, limit %d", ErrTooLarge, wal.ErrTooLarge, n, limit)
}

// checkIDsLocked refuses producer-given ids already in use, in the dedup
// window, or repeated within the batch.
func (q *Queue) checkIDsLocked(recs []record) error {
	q.expireDedupLocked(recs[0].At)
	var seen map[string]bool
	for i := range recs {
		if recs[i].Flags&flagProducerID == 0 {
			continue
		}
		id := recs[i].ID
		if seen[id] {
			return fmt.Errorf("%w: %q", ErrDuplicate, id)
		}
		if q.mu.st.dedup.Has(id) {
			return q.duplicateLocked(id)
		}
		if len(recs) > 1 {
			if seen == nil {
				seen = make(map[string]bool)
			}
			seen[id] = true
		}
	}
	return nil
}

// checkIDLocked is checkIDsLocked for one record.
func (q *Queue) checkIDLocked(r *record) error {
	if r.Flags&flagProducerID == 0 {
		return nil
	}
	q.expireDedupLocked(r.At)
	return q.checkProducerIDLocked(r)
}

// checkProducerIDLocked refuses r's producer-given id if it is in use or
// in the dedup window (which the caller expired at r.At first).
func (q *Queue) checkProducerIDLocked(r *record) error {
	if r.Flags&flagProducerID != 0 && q.mu.st.dedup.Has(r.ID) {
		return q.duplicateLocked(r.ID)
	}
	return nil
}

// duplicateLocked is the refusal of the producer-given id, which the
// state holds. ErrDuplicate tells a producer that the message is in the
// queue, and it drops the one it retries; but the state also holds the id
// of an enqueue whose write failed, which no file holds, and of one in
// flight, whose write or fsync may still fail. So on a poisoned log it is
// the error that poisoned it, and while the id's enqueue is not yet as
// durable as the sync mode promises it is a *heldID, for which the
// caller waits (awaitHeld) and tries again; else ErrDuplicate.
func (q *Queue) duplicateLocked(id string) error {
	if err := q.poisonErr("enqueue"); err != nil {
		return err
	}
	if it, ok := q.mu.st.dedup.Get(id); ok && !q.durable(it.Seq) {
		return &heldID{id: id, seq: it.Seq, c: q.mu.idCommit}
	}
	return fmt.Errorf("%w: %q", ErrDuplicate, id)
}

// durable reports whether the record at lsn is as durable as the sync
// mode promises of a call that returned: fsynced under SyncAlways,
// written under the others.
func (q *Queue) durable(lsn uint64) bool {
	if q.opts.ReadOnly {
		return true // nothing is in flight: the enqueue refuses itself
	}
	if q.opts.Sync == SyncAlways {
		return lsn <= q.log.DurableLSN()
	}
	return lsn <= q.log.WrittenLSN()
}

// heldID is the refusal of a producer-given id held by an enqueue whose
// outcome is not known yet: that enqueue's record, at LSN seq, is not as
// durable as the sync mode promises. It never reaches a caller: the
// enqueue waits for that outcome (awaitHeld) and tries again.
type heldID struct {
	id  string
	seq uint64
	c   *wal.Commit // Queue.mu.idCommit when refused: its group holds seq, or is later
}

func (h *heldID) Error() string {
	return fmt.Sprintf("queue: id %q is held by the enqueue at LSN %d, still in flight", h.id, h.seq)
}

// awaitHeld returns err, an enqueue's refusal, unless it is a *heldID:
// then it waits until the holder's record is as durable as the sync mode
// promises, or failed, and returns nil, for the enqueue to try again and
// learn that outcome (ErrDuplicate, the error that poisoned the log,
// ErrClosed). It waits for the commit of the last enqueue with a
// producer-given id appended when the id was refused, whose group holds
// the holder's record or a later one: once that commit is done,
// WrittenLSN (DurableLSN under SyncAlways) covers its group, which ends
// at or after the holder's record (a failure poisons the log first). No
// fsync is made for the wait. It returns ctx's error if ctx ends first
// (the outcome is not known: the enqueue appended nothing). Were that
// commit ever missing or done already, it waits for everything appended
// so far instead (Flush), never trying again at once.
func (q *Queue) awaitHeld(ctx context.Context, err error) error {
	h, ok := err.(*heldID)
	if !ok {
		return err
	}
	if h.c != nil && !h.c.Completed() {
		return awaitDone(ctx, h.c)
	}
	// A failure poisons the log, and the queue is closed before its log:
	// the next try reports either.
	if ferr := q.log.Flush(); ferr != nil && q.log.Err() == nil && !errors.Is(ferr, wal.ErrClosed) {
		return fmt.Errorf("queue: enqueue: wait for the enqueue holding the id: %w", ferr)
	}
	return nil
}

// expireDedupLocked forgets the acked producer-given ids whose dedup
// window has passed at now, the enqueue's time (its records' At): the
// enqueue reads the clock before it takes the lock (again after a wait
// for an id's holder, awaitHeld), and does not read it again under the
// lock. Its time is at most the lock's wait older than a reading here, so an
// id is forgotten no sooner than its window allows. An open without a
// window keeps no acked id: it forgot them at Open (recoverer.Install),
// and its acks forget theirs. A snapshot calls it too (takeSnapshot),
// and what it forgets marks the next snapshot due though no record was
// appended, so that the forget is kept (by a Close or a compaction).
func (q *Queue) expireDedupLocked(now int64) {
	if q.opts.DedupWindow > 0 && q.mu.st.dedup.Kept() > 0 &&
		q.mu.st.dedup.Expire(now-int64(q.opts.DedupWindow)) > 0 {
		q.mu.forgot = true
	}
}

// newID returns a random version-4 UUID (internal/msgid, shared with the
// Redis backend).
func newID() string { return msgid.New() }

// isSmall says whether Enqueue encodes an item's record under q.mu, into
// the queue's own buffer (q.mu.enc), as appendOfLocked encodes every
// other record: one with an id of up to 64 bytes and without headers,
// whose fields but the payload take at most about 200 bytes
// (maxEncodedSize bounds them by 121 and the id), so that q.mu is held for
// a short encode only. A payload of more than smallPayload bytes is not
// encoded there: the log copies it into its group from the caller's
// slice, between the record's other bytes (encodeAround), as it would
// copy the whole record, so q.mu is held no longer than for a record
// encoded before. A larger record is encoded before q.mu is taken, into
// a pooled buffer (encBufs).
func isSmall(it *Item) bool {
	return len(it.Headers) == 0 && len(it.ID) <= 64
}

// smallPayload is the largest payload appendOfLocked encodes into q.mu.enc
// with the rest of its record; a larger one goes to the log as a part of
// its own (wal.Log.AppendJoined).
const smallPayload = 256

// encBufs keeps encoding buffers for records encoded outside q.mu.
type encBufs struct{ pool sync.Pool }

// maxPooledEnc is the largest buffer put back: a large message's buffer
// is left to the collector rather than pinned.
const maxPooledEnc = 64 << 10

func (p *encBufs) get() *[]byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

func (p *encBufs) put(b *[]byte) {
	if cap(*b) <= maxPooledEnc {
		*b = (*b)[:0]
		p.pool.Put(b)
	}
}
