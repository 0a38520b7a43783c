package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/walq/walq/index"
	"github.com/walq/walq/wal"
)

// discard is the logger of a queue opened without Options.Logger.
var discard = slog.New(discardHandler{})

// discardHandler drops every record.
type discardHandler struct{}

func (discardHandler) Enabled(context.Context, slog.Level) bool  { return false }
func (discardHandler) Handle(context.Context, slog.Record) error { return nil }
func (h discardHandler) WithAttrs([]slog.Attr) slog.Handler      { return h }
func (h discardHandler) WithGroup(string) slog.Handler           { return h }

// logger returns the queue's logger; never nil.
func (q *Queue) logger() *slog.Logger {
	if q.opts.Logger == nil {
		return discard
	}
	return q.opts.Logger
}

// logRecovery reports what Open found: at Info when the previous process
// closed cleanly and nothing was repaired, at Warn otherwise.
func (q *Queue) logRecovery() {
	r := q.recovery
	attrs := []any{"dir", q.dir, "snapshot_lsn", r.SnapshotLSN, "replayed", r.Replayed,
		"clean", r.Clean, "duration", r.Duration}
	level := slog.LevelInfo
	if r.Log.Torn != nil {
		attrs = append(attrs, "torn_tail_bytes", r.Log.Torn.Bytes, "torn_tail", r.Log.Torn.String())
		level = slog.LevelWarn
	}
	if n := len(r.Log.Salvaged); n > 0 {
		lost := 0
		for _, d := range r.Log.Salvaged {
			lost += d.Entries
		}
		attrs = append(attrs, "salvaged_regions", n, "salvaged_entries", lost,
			"skipped_records", r.Skipped, "rewritten", r.Rewritten)
		level = slog.LevelWarn
	}
	if r.Requeued > 0 {
		attrs = append(attrs, "requeued", r.Requeued, "dead_on_open", r.DeadOnOpen)
		level = slog.LevelWarn
	}
	q.logger().Log(context.Background(), level, "queue: opened", attrs...)
}

// noteSettled records what a consumer's settle did, once its record is appended: the
// enqueue-to-ack time of an ack; a dead-lettering is kept in out, to be
// logged by logDead once q.mu is released.
func (q *Queue) noteSettled(e index.Entry, rec *record, out *settled) {
	switch rec.Op {
	case opAck:
		q.obs.observeAck(rec.At - e.EnqueuedAt)
	case opDead:
		out.dead = append(out.dead, deadNote{id: e.ID, seq: e.Seq, deliveries: e.Deliveries, reason: rec.Reason})
	}
}

// deadNote is a dead-lettering to log: of a message, or of a sorted
// queue's value (key set).
type deadNote struct {
	id         string // the message's id
	key        string // the sorted value's message key; "" for a message
	seq        uint64 // its sequence number
	deliveries uint32 // deliveries it had
	reason     string // the dead-letter reason its record holds
}

// deadNotes are the dead-letterings at MaxDeliveries that deliveries and
// sorted queues' pulls made on their way (appendAtLimitLocked), in LSN
// order, and the commit and LSN of the last one's record.
type deadNotes struct {
	notes []deadNote
	last  *wal.Commit // nil when notes is empty
	lsn   uint64      // the last one's record; 0 when notes is empty
}

// logPendingDead logs the dead-letterings that deliveries and pulls left
// to it (q.mu.dead), in order, once their records are as durable as the
// sync mode promises (makeDurable: the last one's covers those before it). It
// logs none of them when that write or fsync failed: the log is poisoned
// and a power loss may undo them, so that the reopened queue holds every
// message logged as dead-lettered in its dead set. The housekeeper runs
// it, and Close once the housekeeper has returned: one at a time, so
// each note is logged once, or dropped once, in order. It runs without
// q.mu (see logDead).
func (q *Queue) logPendingDead() {
	q.mu.Lock()
	d := q.mu.dead
	q.mu.dead = deadNotes{}
	q.mu.Unlock()
	if len(d.notes) > 0 && q.makeDurable(d.last, d.lsn) == nil {
		q.logDead(d.notes)
	}
}

// makeDurable waits until the record at lsn, appended lazily under
// commit c, is as durable as the sync mode promises (durable): written,
// and under SyncAlways covered by an fsync, which it runs (wal.Log.Flush)
// unless one already did, as nobody else may: a lazy record starts none
// of its own.
func (q *Queue) makeDurable(c *wal.Commit, lsn uint64) error {
	if err := wait(c); err != nil {
		return err
	}
	if q.durable(lsn) {
		return nil
	}
	if err := q.log.Flush(); err != nil {
		return fmt.Errorf("queue: flush: %w", err)
	}
	return nil
}

// logDead logs the dead-letterings of a settle, or of a delivery that
// MaxDeliveries kept from a ready message (leaseOneLocked); for a sorted
// queue, of a batch's dead-letter or nack past MaxDeliveries, or of a
// pull that MaxDeliveries kept from a value. It runs
// without q.mu: the Logger's handler is the user's, and may call the
// queue (Stats, say) or block on its own output without stopping the
// queue.
func (q *Queue) logDead(ds []deadNote) {
	for _, d := range ds {
		if d.key != "" {
			q.logger().Info("queue: value dead-lettered", "key", d.key, "seq", d.seq,
				"deliveries", d.deliveries, "reason", d.reason)
			continue
		}
		q.logger().Info("queue: message dead-lettered", "id", d.id, "seq", d.seq,
			"deliveries", d.deliveries, "reason", d.reason)
	}
}

// noteBatchDead keeps in out the values of the batch b that rec, appended,
// dead-letters: all of them for a batch dead-letter, those past
// MaxDeliveries for a return.
func (q *Queue) noteBatchDead(b index.Batch, rec *record, out *[]deadNote) {
	for _, v := range b.Values {
		if rec.Op == opBatchDead || (rec.Op == opBatchReturn && rec.Count > 0 && v.Deliveries >= rec.Count) {
			*out = append(*out, valueDeadNote(v, rec.Reason))
		}
	}
}

func valueDeadNote(v index.SortedValue, reason string) deadNote {
	return deadNote{key: v.Key, seq: v.Seq, deliveries: v.Deliveries, reason: reason}
}

// checkWriteError logs the log's sticky write error the first time it is
// seen; every later write fails with it, so once is enough.
func (q *Queue) checkWriteError() {
	err := q.log.Err()
	if err == nil || !q.obs.writeErrLogged.CompareAndSwap(false, true) {
		return
	}
	q.logger().Error("queue: the log refuses writes; reopen the queue to recover", "dir", q.dir, "err", err)
}

// job names a kind of background work.
type job int

const (
	jobRequeue job = iota // ending expired leases
	jobCompact            // snapshot, copy-forward, truncation
	jobs
)

func (j job) String() string { return [...]string{"requeue", "compaction"}[j] }

// Backoff between attempts of a failing background job: doubling from
// retryMin up to retryMax.
const (
	retryMin = 250 * time.Millisecond
	retryMax = time.Minute
)

// background is the state of the housekeeper's failing jobs.
type background struct {
	mu    sync.Mutex
	last  error        // the last failure; nil once every failed job has succeeded since
	at    time.Time    // when it happened
	count uint64       // failures since Open
	job   [jobs]status // per job
}

// status is one job's run of failures.
type status struct {
	fails   int       // consecutive failures; 0 when the last attempt succeeded
	retryAt time.Time // no attempt before this while failing
}

// due reports whether j may run at now: it is not backing off.
func (b *background) due(j job, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.job[j].fails == 0 || !now.Before(b.job[j].retryAt)
}

// finish records the outcome of an attempt of j; it returns the number of
// consecutive failures before it and, on failure, the wait before the next
// attempt.
func (b *background) finish(j job, err error, now time.Time) (int, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &b.job[j]
	prev := s.fails
	if err == nil {
		s.fails = 0
		if b.healthy() {
			b.last = nil
		}
		return prev, 0
	}
	s.fails++
	wait := min(retryMin<<min(s.fails-1, 20), retryMax)
	s.retryAt = now.Add(wait)
	b.last, b.at = err, now
	b.count++
	return prev, wait
}

func (b *background) healthy() bool {
	for _, s := range b.job {
		if s.fails > 0 {
			return false
		}
	}
	return true
}

// wait returns how long until the earliest retry of a failing job, or -1
// when none is failing.
func (b *background) wait(j job, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.job[j].fails == 0 {
		return -1
	}
	return max(0, b.job[j].retryAt.Sub(now))
}

// fill copies the background error figures into s.
func (b *background) fill(s *Stats) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s.BackgroundErr, s.BackgroundErrAt, s.BackgroundErrors = b.last, b.at, b.count
}

// report logs the outcome of an attempt of j and records it.
func (q *Queue) report(j job, err error) {
	prev, wait := q.obs.bg.finish(j, err, q.opts.Clock.Now())
	switch {
	case err != nil:
		q.checkWriteError()
		q.logger().Error("queue: background "+j.String()+" failed", "dir", q.dir,
			"attempt", prev+1, "retry_in", wait, "err", err)
	case prev > 0:
		q.logger().Info("queue: background "+j.String()+" succeeded again", "dir", q.dir, "failures", prev)
	}
}

// requeueInBackground ends expired leases unless ManualRequeue is set or a
// failing attempt is backing off, and logs the leases that ran out.
func (q *Queue) requeueInBackground() {
	if q.opts.ManualRequeue || !q.obs.bg.due(jobRequeue, q.opts.Clock.Now()) {
		return
	}
	before := q.deadLettered()
	n, err := q.RequeueExpired()
	if n > 0 {
		dead := q.deadLettered() - before
		q.logger().Info("queue: leases ran out", "dir", q.dir, "leases", n, "dead_lettered", dead)
	}
	if errors.Is(err, ErrClosed) {
		return // Close is under way
	}
	q.report(jobRequeue, err)
}

// deadLettered returns the lifetime dead-letter count.
func (q *Queue) deadLettered() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.st.counts.DeadLettered
}

// compactInBackground compacts when the log has grown enough, unless a
// failing attempt is backing off, and logs what it did.
func (q *Queue) compactInBackground() {
	if !q.compactDue() || !q.obs.bg.due(jobCompact, q.opts.Clock.Now()) {
		return
	}
	start := q.opts.Clock.Now()
	before, moved := q.log.Size(), q.movedCount()
	err := q.compact()
	if errors.Is(err, ErrClosed) {
		return // Close is under way
	}
	q.report(jobCompact, err)
	if err != nil {
		return
	}
	q.snapshotStillDue()
	took := q.opts.Clock.Now().Sub(start)
	q.logger().Debug("queue: compacted", "dir", q.dir, "duration", took,
		"log_bytes_before", before, "log_bytes_after", q.log.Size(), "snapshot_lsn", q.snapshotLSN())
	if n := q.movedCount() - moved; n > 0 {
		q.logger().Debug("queue: copied old messages forward", "dir", q.dir, "messages", n)
	}
}

// snapshotStillDue wakes the housekeeper again when the records appended
// while a compaction ran already make SnapshotBytes: appliedLocked wakes
// it only as the count reaches SnapshotBytes, which it had before the
// snapshot took off the bytes it covers.
func (q *Queue) snapshotStillDue() {
	q.mu.Lock()
	due := q.mu.sinceSnap >= q.opts.SnapshotBytes
	q.mu.Unlock()
	if due {
		q.wakeHousekeeper()
	}
}

func (q *Queue) movedCount() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.st.counts.Moved
}

func (q *Queue) snapshotLSN() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.snapLSN
}

// nextWake returns how long the housekeeper may sleep: until the next
// lease deadline (or, while requeueing fails, its next attempt) or the
// next attempt of a failing compaction; -1 for as long as it likes.
func (q *Queue) nextWake() time.Duration {
	d := q.untilDeadline()
	now := q.opts.Clock.Now()
	if w := q.obs.bg.wait(jobRequeue, now); w >= 0 && d >= 0 {
		d = max(d, w)
	}
	if w := q.obs.bg.wait(jobCompact, now); w >= 0 && (d < 0 || w < d) {
		d = w
	}
	return d
}
