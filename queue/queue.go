package queue

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walq/walq/index"
	"github.com/walq/walq/recovery"
	"github.com/walq/walq/wal"
)

// Queue is a durable ack queue in one directory. It is safe for concurrent
// use by any number of producers and consumers.
type Queue struct {
	dir      string   // the queue directory
	opts     Options  // validated, defaults filled
	log      *wal.Log // the write-ahead log; safe for concurrent use
	lockFile *dirLock // holds the directory's lock until Close
	recovery Recovery // what Open found; set before Open returns
	ident    Identity // what the directory holds
	inUse    bool     // read-only, opened while another process had the directory open

	// mu guards the state and everything that must change with it. Heavy
	// work (payload reads, fsync waits, snapshot encoding) runs outside it.
	mu struct {
		sync.Mutex
		st         *state        // the indexes
		cursor     *wal.Reader   // reads enqueue records from st.cursor on
		closed     bool          // Close has begun
		changed    chan struct{} // closed and replaced when a message may have become ready
		sinceSnap  int64         // log bytes appended since the last snapshot
		snapLSN    uint64        // LSN of the last snapshot
		snapAt     time.Time     // when it was taken
		forgot     bool          // acked ids were forgotten (at Open, or as the window passed) that the last snapshot keeps: the next is written though no record was appended
		armed      int64         // lease deadline the housekeeper sleeps until (unix ns); 0 when none
		sleepUntil int64         // earliest time a blocked call sleeps until (unix ns, sleepers.go); 0 when none
		async      inflight      // asynchronous calls not yet complete (async.go)
		enc        []byte        // appendLSNLocked's encoding buffer; the log copies what it appends
		noWait     bool          // set by an asynchronous call around its appends: nobody waits for them, so the committer must be woken
		late       bool          // set with noWait by SettleAsync: the committer may be woken late (wal.Log.AppendLate), as the next delivery's write usually takes its records
		lazy       bool          // set around a dead-lettering at MaxDeliveries that a delivery or pull makes (appendAtLimitLocked): its record is appended lazily, as the lease is
		dead       deadNotes     // those dead-letterings, in LSN order, for the housekeeper to log once durable (logPendingDead)
		idCommit   *wal.Commit   // the commit of the group holding the last enqueue record with a producer-given id appended; nil before the first (see heldID)
	}

	waiters   atomic.Int32  // consumers between looking for a message and waiting
	timed     atomic.Int32  // blocked calls that noted a due time and have not left their sleep (sleepers.go)
	kick      chan struct{} // wakes the housekeeper; buffered, one slot
	stop      chan struct{} // closed by Close to stop the housekeeper
	wg        sync.WaitGroup
	hkID      atomic.Uint64 // the housekeeper's goroutine id (goroutineID); 0 until it starts
	compactMu sync.Mutex    // one snapshot, or one whole compaction pass (compact), at a time
	moveMu    sync.Mutex    // one copy-forward pass at a time
	obs       observer      // histograms, background errors (metrics.go, events.go)
	written   written       // the log as written, read back for Stats once it is poisoned (written.go)
	encBufs   encBufs       // buffers for records encoded outside mu (Enqueue)
	wall      *wallClock    // reads the system clock for now; nil when Options.Clock is not the default

	// foundNothing, when set (white-box tests only), is called under q.mu
	// by a blocking consumer that found nothing to deliver, before it goes
	// to sleep. Set before the queue is used.
	foundNothing func()
	// copying, when set (white-box tests only), is called by movePinned
	// once it holds moveMu, before it copies. Set before the queue is used.
	copying func()
	// peeking, when set (white-box tests only), is called by Peek once it
	// released q.mu, before it reads the log. Set before the queue is used.
	peeking func()
	// reading, when set (white-box tests only), is called before each
	// read of the log that a compaction's cut may overtake: each read of
	// an indexed message's or value's record (follow), Peek's read of a
	// never-delivered message, and each read of the never-delivered
	// messages by Browse. It runs outside q.mu. Set before the queue is
	// used.
	reading func()
	// counted, when set (white-box tests only), is called by Stats once it
	// copied the counts and released q.mu, before it reads the log. Set
	// before the queue is used.
	counted func()
	// flushing, when set (white-box tests only), is called by Flush with
	// the flights it is about to wait for, once it released q.mu. Set
	// before the queue is used.
	flushing func([]flight)
}

// Recovery says what Open found and did.
type Recovery struct {
	SnapshotLSN  uint64        // LSN of the snapshot loaded; 0 when none
	Replayed     int           // log records replayed after it
	Skipped      int           // records a salvaging open could not apply (others were lost)
	Rewritten    int           // messages (a sorted queue's values) a salvaging open copied past the damage or dropped
	Requeued     int           // leases of a crashed process made ready again (a sorted queue's batch is one)
	DeadOnOpen   int           // of those, messages that reached MaxDeliveries (batches with a value that did)
	Clean        bool          // the previous process closed the queue cleanly
	Log          wal.Report    // torn tail cut, damage salvaged
	LostBefore   uint64        // salvage: the log starts here, records the snapshot needed before it are lost; 0 when none
	SnapshotLost recovery.Info // salvage: the damaged newest snapshot set aside (the state was rebuilt from the older snapshot at SnapshotLSN, or from the log alone when 0); zero when none
	// Dropped lists, for a salvage, the messages the index held
	// (delivered, delayed, dead or leased, and never-delivered ones a
	// compaction copied forward; a sorted queue's values, by key) that it
	// dropped because their records were lost, then because they are
	// another's, each by Seq. A never-delivered message still at the
	// record of its enqueue is not in it when that record was lost:
	// nothing left holds its id. Its Seq is among the LSNs lost (Log,
	// LostBefore; RepairReport.LostLSNs). One copied forward is named here
	// when its copy was lost, and its Seq is not among the LSNs lost: the
	// copy's LSN is.
	Dropped  []Lost
	Duration time.Duration // time Open took
}

// Recovery returns what Open found and did.
func (q *Queue) Recovery() Recovery { return q.recovery }

// Dir returns the queue's directory.
func (q *Queue) Dir() string { return q.dir }

// now returns the queue clock's time in unix nanoseconds, never 0: the
// times it stamps use 0 for none (a live message's AckedAt, a receipt's
// unchecked At), so a clock reading exactly the epoch reads one
// nanosecond after it.
func (q *Queue) now() int64 {
	var t int64
	if q.wall != nil {
		t = q.wall.unixNano()
	} else {
		t = q.opts.Clock.Now().UnixNano()
	}
	if t == 0 {
		return 1
	}
	return t
}

// appendLocked appends the record r, whose msgpack form is enc (nil to
// encode it here), and applies it to the state. A record that does not
// apply to the state is refused with ErrInvalidChange before it is
// written. q.mu must be held.
func (q *Queue) appendLocked(r *record, enc []byte) (*wal.Commit, error) {
	_, c, err := q.appendLSNLocked(r, enc)
	return c, err
}

// appendLSNLocked is appendLocked that also returns the record's LSN.
func (q *Queue) appendLSNLocked(r *record, enc []byte) (uint64, *wal.Commit, error) {
	return q.appendOfLocked(r, enc, nil)
}

// appendOfLocked is appendLSNLocked for a record about the table's entry
// *e (e.Seq == r.Seq), which the caller looked up under q.mu with no
// change since: the state's check and change take it (checkOf, changeOf)
// instead of looking it up twice more. e nil: they look it up.
func (q *Queue) appendOfLocked(r *record, enc []byte, e *index.Entry) (uint64, *wal.Commit, error) {
	if e != nil && !namesEntry(r.Op) {
		e = nil // only the records that name an entry take one
	}
	if e != nil && e.Seq != r.Seq {
		panic(fmt.Sprintf("queue: a record about message %d checked against entry %d", r.Seq, e.Seq))
	}
	if err := q.appendableLocked(r, e); err != nil {
		return 0, nil, err
	}
	if enc == nil && len(r.Payload) > smallPayload {
		return q.appendAroundLocked(r, e)
	}
	if enc == nil {
		q.mu.enc = encodeRecord(q.mu.enc[:0], r)
		enc = q.mu.enc
	}
	if sizeLimited(r.Op) {
		if err := q.checkRecordSize(len(enc)); err != nil {
			return 0, nil, err
		}
	}
	lazy := lazyOp(r.Op) || q.mu.lazy
	var lsn uint64
	var c *wal.Commit
	var err error
	if waitedOps[r.Op] && !q.mu.noWait {
		lsn, c, err = q.log.AppendWaiting(enc, lazy)
	} else if q.mu.late && !lazy {
		lsn, c, err = q.log.AppendLate(enc)
	} else if lazy {
		lsn, c, err = q.log.AppendLazy(enc)
	} else {
		lsn, c, err = q.log.Append(enc)
	}
	if err != nil {
		return 0, nil, q.appendFailed(r.Op, err)
	}
	// appendedLocked's work, inline on this path: the call cost more.
	q.appliedLocked(lsn, r, len(enc), e)
	if r.Flags&flagProducerID != 0 && r.Op == opEnqueue {
		q.mu.idCommit = c
	}
	return lsn, c, nil
}

// appendAroundLocked is appendOfLocked, past its checks of the state, for
// a record with a payload of more than smallPayload bytes: the log copies
// the payload into its group from r's slice, between the record's other
// bytes (encodeAround), rather than from an encoding of the whole record.
func (q *Queue) appendAroundLocked(r *record, e *index.Entry) (uint64, *wal.Commit, error) {
	enc, at := encodeAround(q.mu.enc[:0], r)
	q.mu.enc = enc
	n := len(enc) + len(r.Payload)
	if sizeLimited(r.Op) {
		if err := q.checkRecordSize(n); err != nil {
			return 0, nil, err
		}
	}
	parts := [3][]byte{enc[:at], r.Payload, enc[at:]}
	waited := waitedOps[r.Op] && !q.mu.noWait
	lsn, c, err := q.log.AppendJoined(parts[:], lazyOp(r.Op), !waited)
	if err != nil {
		return 0, nil, q.appendFailed(r.Op, err)
	}
	return q.appendedLocked(lsn, c, r, n, e)
}

// sizeLimited reports whether a record of op is held to checkRecordSize:
// every one but a copy forward, which may pass a new message's limit.
func sizeLimited(o op) bool { return o != opMove && o != opMoveDead }

// lazyOp reports whether a record of op only waits for its write: a
// delivery (see Dequeue), which the ack that follows makes durable.
func lazyOp(o op) bool { return o == opLease || o == opPull }

// appendedLocked applies a record of n bytes the log took at lsn.
func (q *Queue) appendedLocked(lsn uint64, c *wal.Commit, r *record, n int, e *index.Entry) (uint64, *wal.Commit, error) {
	q.appliedLocked(lsn, r, n, e)
	if r.Flags&flagProducerID != 0 && r.Op == opEnqueue {
		q.mu.idCommit = c
	}
	return lsn, c, nil
}

// appendableLocked says why r cannot be appended now: the queue is closed
// or read-only, or r does not apply to the state. Records are checked
// before they are written: once appended, a record must apply, or the log
// would no longer replay. e is the table's entry for r.Seq when the
// caller has it in hand (appendOfLocked), else nil.
func (q *Queue) appendableLocked(r *record, e *index.Entry) error {
	if q.mu.closed {
		return ErrClosed
	}
	if q.opts.ReadOnly {
		return ErrReadOnly
	}
	var err error
	if e != nil {
		err = q.mu.st.checkOf(r, *e, true)
	} else {
		err = q.mu.st.check(r)
	}
	if err != nil {
		return fmt.Errorf("queue: %s refused: %w", opName(r.Op), err)
	}
	return nil
}

// appendFailed wraps the log's refusal of a record of op; the housekeeper
// logs a sticky write error (events.go).
func (q *Queue) appendFailed(o op, err error) error {
	q.wakeHousekeeper()
	return fmt.Errorf("queue: append %s: %w", opName(o), err)
}

// appliedLocked applies r, appended at lsn in n bytes, to the state, and
// counts its bytes towards the next snapshot, waking the housekeeper when
// the count reaches SnapshotBytes (a snapshot is due) and at each
// SegmentSize passed (a compaction may be due to keep the log within its
// bound: compactDue). e is as for appendableLocked.
func (q *Queue) appliedLocked(lsn uint64, r *record, n int, e *index.Entry) {
	if e != nil {
		q.mu.st.changeOf(lsn, r, *e, true)
	} else {
		q.mu.st.change(lsn, r, n)
	}
	before := q.mu.sinceSnap
	q.mu.sinceSnap += int64(n)
	if (before < q.opts.SnapshotBytes && q.mu.sinceSnap >= q.opts.SnapshotBytes) ||
		before/q.opts.SegmentSize != q.mu.sinceSnap/q.opts.SegmentSize {
		q.wakeHousekeeper()
	}
}

// waitedOps are the records whose writer waits for the commit (or its
// write) right after appending, unless it is an asynchronous call
// (q.mu.noWait): the waiting call writes the group itself, so the append
// does not wake the log's committer.
var waitedOps = [lastOp + 1]bool{opEnqueue: true, opLease: true, opAck: true,
	opPublish: true, opPull: true, opBatchAck: true}

// wait waits for c, the commit of a record this call appended.
func wait(c *wal.Commit) error {
	if c == nil {
		return nil
	}
	if err := c.Wait(); err != nil {
		return fmt.Errorf("queue: commit: %w", err)
	}
	return nil
}

// waitWritten waits until c, the commit of a record this call appended, is
// written: readable, and safe from a crash of the process.
func waitWritten(c *wal.Commit) error {
	if c == nil {
		return nil
	}
	if err := c.WaitWritten(); err != nil {
		return fmt.Errorf("queue: commit: %w", err)
	}
	return nil
}

// waitReady waits for c, the commit of records that make messages ready
// (enqueues, publishes), and on success wakes the consumers waiting for a
// message. A failure poisoned the log, which wakes them itself (sleepFor).
func (q *Queue) waitReady(c *wal.Commit) error {
	if err := wait(c); err != nil {
		return err
	}
	q.signal()
	return nil
}

// signal wakes the consumers waiting for a message, if any.
func (q *Queue) signal() {
	if q.waiters.Load() == 0 {
		return
	}
	q.mu.Lock()
	q.broadcastLocked()
	q.mu.Unlock()
}

func (q *Queue) broadcastLocked() {
	close(q.mu.changed)
	q.mu.changed = make(chan struct{})
}

// wakeHousekeeper asks the housekeeper to look at deadlines and the log
// size again.
func (q *Queue) wakeHousekeeper() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// Close stops the queue: it wakes blocked consumers with ErrClosed, records
// a clean shutdown, takes a snapshot, and closes the log and the directory
// lock. Leases held at Close keep running after the next Open until their
// deadline, so a receipt can still be acked by the next process. A
// snapshot that fails at Close (a full disk) is returned after the log
// and the lock are closed: the clean shutdown is recorded, the next Open
// replays from the previous snapshot and the leases keep running. On a
// poisoned log Close records nothing and takes no snapshot: it closes the
// log and the lock and returns the error that poisoned the log, and the
// next Open recovers the directory as after a crash. When the fsync that
// covers the clean shutdown's record fails (its commit's under SyncAlways;
// else the flush of the log before Close's snapshot, or a SyncInterval
// tick's), Close returns that error, but the record was written: the
// next Open that reads it back (the operating system still holds the page,
// or it reached the disk) sees a clean shutdown and the leases keep
// running; one that finds it gone (the page was dropped, a power loss)
// recovers as after a crash. Nothing marks the failure: a mark would have
// to be written to the disk that just failed an fsync. Either way a Compact
// under way ends before the log is closed and the directory released, and
// the Pending of every asynchronous call appended before Close is
// complete when it returns: with success on a healthy log, else with the
// error that poisoned it; a call still blocked on the MaxPending window
// returns ErrClosed and appends nothing. A second Close returns ErrClosed
// at once, also while the first is still running (before the Pendings
// are complete). Called on the housekeeping goroutine (by a Logger
// handler of a background event), which it would wait for, it returns
// ErrHousekeeper at once and changes nothing.
//
// Close has no time limit: it returns once the log's write or fsync under
// way has, so on a device whose fsync never returns (a hung disk, an
// unreachable network file system) Close never returns. It cannot give up sooner without releasing the
// directory lock while a write may still land in the log, or leaving the
// outcome of the calls that fsync covers unknown. A process that must
// exit regardless can: the next Open finds the directory as a crash
// leaves it.
func (q *Queue) Close() error {
	if q.opts.ReadOnly {
		return q.closeReadOnly()
	}
	if id := q.hkID.Load(); id != 0 && id == goroutineID() {
		return ErrHousekeeper
	}
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	c, appendErr := q.appendLocked(&record{Op: opClose, At: q.now()}, nil)
	q.mu.closed = true
	q.broadcastLocked()
	q.mu.Unlock()
	close(q.stop)
	q.wg.Wait()
	err := wait(c)
	q.logPendingDead() // what the housekeeper left: no delivery adds to it once closed is set
	if appendErr != nil {
		err = appendErr
	}
	// A compaction under way (a Compact's) ends before the log is closed
	// and the directory released, poisoned or not: it would write its
	// snapshot and truncate after them. One that starts later finds the
	// queue closed (compact).
	q.compactMu.Lock()
	if err == nil && q.log.Err() == nil {
		err = q.takeSnapshot()
	}
	q.closeCursor() // it may pin a segment the last snapshot removed
	if q.log.Err() != nil {
		q.keepWritten() // Stats after Close reads the log no more
	}
	cerr := q.log.Close()
	q.compactMu.Unlock()
	if err == nil && cerr != nil {
		err = fmt.Errorf("queue: close log: %w", cerr)
	}
	// A lock still held is no hand-over a next Open may count on: its
	// failure is reported beside whatever else Close returns.
	return errors.Join(err, q.opts.unlock(q.lockFile))
}
