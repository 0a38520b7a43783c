package queue

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/walq/walq/wal"
)

// Stats is a point-in-time view of a queue.
type Stats struct {
	// At is when the figures were read, by the queue's clock
	// (Options.Clock; the Redis engine's: the handle's): the time to
	// measure OldestEnqueuedAt's age from.
	At time.Time
	// Closed is set once Close has begun: the counts are the last ones
	// and the log fields (LogBytes, Segments, OldestEnqueuedAt of
	// never-delivered messages) no longer tell what is on disk. A closed
	// handle of the Redis engine (redisq) reads nothing: its counts are
	// then zero, and its StatsContext fails with ErrClosed.
	Closed bool

	Ready    int64 // deliverable now (delayed messages whose time has come included)
	Delayed  int64 // waiting for their deliver-at time or a nack delay
	InFlight int64 // leased to a consumer
	Dead     int64 // in the dead-letter set

	Enqueued     uint64 // lifetime totals
	Delivered    uint64
	Acked        uint64
	Nacked       uint64
	Expired      uint64
	DeadLettered uint64
	Moved        uint64 // messages copied forward by compaction

	// Sorted queues.
	SortedPending int    // values waiting to be pulled
	SortedKeys    int    // keys that can be pulled now or when their window closes
	SortedBatches int    // batches leased
	SortedLeased  int    // values in leased batches
	SortedDead    int    // values in the dead set
	Published     uint64 // lifetime totals
	Pulled        uint64
	BatchesAcked  uint64

	// OldestEnqueuedAt is the enqueue time of the oldest live, not dead,
	// message (ready, delayed or in flight); of a sorted or windowed
	// queue, the publish time of its oldest pending or leased value. Zero
	// when there is none (or none whose time could be read: OldestErr),
	// and also while every live message's enqueue
	// has been counted but its record is still being written (with
	// SyncAlways, behind the fsync that runs before it): Stats reads the
	// time of a never-delivered message from the log, and does not wait
	// for a write.
	OldestEnqueuedAt time.Time
	// OldestErr is set when the enqueue record of the oldest
	// never-delivered message could not be read from the log:
	// OldestEnqueuedAt then covers the other live messages only (those
	// delivered or delayed before, whose times Stats holds in memory),
	// or is zero. An error wrapping ErrCorrupt names the damage, which
	// the message's delivery meets too (walq verify lists it, walq
	// repair salvages what is left); another is the read's I/O error
	// (the next call reads again). Nil when the record was read, while it
	// is still being written, after a compaction copied it forward (Stats
	// then reads the time from memory), and once Close has begun. The
	// Redis engine sets it when the oldest message's stored body is
	// missing or does not decode.
	OldestErr error

	DedupIDs int // producer-given ids remembered for dedup

	LiveBytes   int64 // log bytes the live messages need
	LogBytes    int64 // bytes of all log segments
	Segments    []wal.SegmentInfo
	SnapshotLSN uint64        // LSN of the last snapshot; 0 when none
	SnapshotAt  time.Time     // when this process took it; zero if it did not
	LastLSN     uint64        // LSN of the last record appended; of a poisoned log, the last one written
	DurableLSN  uint64        // LSN of the last record fsynced
	Sync        SyncMode      // the fsync policy
	AckTimeout  time.Duration // the lease length

	// Background work (lease requeue, snapshots, compaction, copy-forward)
	// that fails is retried with backoff and logged through Options.Logger.
	BackgroundErr    error     // the last failure; nil once every job that failed has succeeded since
	BackgroundErrAt  time.Time // when it happened; kept after it clears
	BackgroundErrors uint64    // failures since Open

	// CountsErr is set when the log is poisoned and the counts, totals
	// and ages are not those of the log as written, because reading it
	// back failed: they are then the calls', an enqueue or publish whose
	// write failed included. An error wrapping ErrCorrupt names the
	// damage that a reopen meets too (walq verify lists it, walq repair
	// salvages what is left); another is the read's I/O error. Nil on a
	// healthy log and on a poisoned one read back. The Redis engine
	// (redisq) sets it, wrapping ErrCorrupt, when a lifetime total reads
	// below zero on the server (a key of the queue deleted or written by
	// hand): that total is then reported as 0.
	CountsErr error
}

// Stats returns counts, sizes and log positions. It reads the oldest
// never-delivered message's record from the log (a read that fails is
// OldestErr); a sorted queue's oldest
// value comes from its index in O(log n), after a look at each run of up
// to 128 pending values of each key whose oldest was dead-lettered or
// dropped on its own since the last call (a few microseconds for a key
// of 100,000 values).
//
// Once a failed write or fsync has poisoned the log, the counts, totals,
// ages and LastLSN are those of the log as written: what a reopen after the
// process ended replays. An enqueue or publish whose write failed is not
// counted (the reopen does not deliver it); one that was written and
// whose fsync failed is, and the reopen finds it, unless a power loss
// (or the kernel, which may drop the pages of a failed fsync) takes it.
// The first call after the poison reads the newest snapshot and the log
// after it back, without the queue's lock; later calls read only what was
// written since (a write under way at the poison). If that read fails,
// CountsErr says why, the counts are the calls', the failed ones
// included, and the failure is logged. A read that met damage is not
// tried again, so every later call, and Stats after Close, reports the
// same at the cost of a call on a healthy log; a read error is tried
// again at the next call, three reads in all, then kept likewise. Leases in the log count as in flight: the
// reopen makes them ready.
func (q *Queue) Stats() Stats {
	var unread error
	if q.log != nil && q.log.Err() != nil && !q.opts.ReadOnly {
		s, err := q.writtenStats()
		if err == nil {
			return s
		}
		unread = err
	}
	s := q.liveStats()
	s.CountsErr = unread
	return s
}

// liveStats is Stats read from the queue's state: the counts under q.mu,
// then, outside it, the oldest never-delivered message's time from the
// log at the cursor. A compaction may copy the never-delivered messages
// forward into the index and cut the log past the cursor in between: the
// read then finds no record there, and liveStats counts again, from the
// index that now holds them. It counts again only after such a cut, so
// each count again follows one more compaction.
func (q *Queue) liveStats() Stats {
	for {
		q.mu.Lock()
		now := q.now()
		s := q.statsHeadLocked(now)
		oldest, ok := s.count(q.mu.st, now)
		cursor, pending := q.mu.st.cursor, q.mu.st.pending
		first := q.log.FirstLSN()
		q.mu.Unlock()
		if q.counted != nil {
			q.counted()
		}
		if q.statsTail(&s, oldest, ok, max(cursor, first), pending) || q.log.FirstLSN() == first {
			return s
		}
	}
}

// writtenStats is Stats of a poisoned queue: the counts of the log as
// written (written.go), or the error of its read back.
func (q *Queue) writtenStats() (Stats, error) {
	q.mu.Lock()
	now := q.now()
	s := q.statsHeadLocked(now)
	q.mu.Unlock()
	q.written.mu.Lock()
	known := q.written.err
	st, err := q.readBackLocked()
	if err != nil {
		q.written.mu.Unlock()
		q.readBackFailed(known, err)
		return Stats{}, err
	}
	oldest, ok := s.count(st, now)
	cursor, pending := st.cursor, st.pending
	last := q.written.next - 1 // the last record the read back found
	q.written.mu.Unlock()
	q.statsTail(&s, oldest, ok, cursor, pending)
	s.LastLSN = last
	return s, nil
}

// statsHeadLocked returns the Stats fields the queue itself holds, read at
// now. q.mu must be held.
func (q *Queue) statsHeadLocked(now int64) Stats {
	return Stats{
		At: time.Unix(0, now), Closed: q.mu.closed, SnapshotLSN: q.mu.snapLSN, SnapshotAt: q.mu.snapAt,
		Sync: q.opts.Sync, AckTimeout: q.opts.AckTimeout,
	}
}

// count fills the counts and totals of st at now and returns the oldest
// enqueue or publish time among its indexed messages and values. Its
// caller holds the lock that guards st.
func (s *Stats) count(st *state, now int64) (oldest int64, ok bool) {
	st.table.SetNow(now)
	st.sorted.Release(now) // keys whose nack delay has passed count as pullable
	c2 := st.table.Counts()
	s.Ready, s.Delayed, s.InFlight, s.Dead = st.pending+int64(c2.Ready), int64(c2.Delayed), int64(c2.Leased), int64(c2.Dead)
	s.Enqueued, s.Delivered, s.Acked, s.Nacked = st.counts.Enqueued, st.counts.Delivered, st.counts.Acked, st.counts.Nacked
	s.Expired, s.DeadLettered, s.Moved = st.counts.Expired, st.counts.DeadLettered, st.counts.Moved
	s.Published, s.Pulled, s.BatchesAcked = st.counts.Published, st.counts.Pulled, st.counts.BatchesAcked
	s.DedupIDs, s.LiveBytes = st.dedup.Len(), st.liveBytes()
	sc := st.sorted.Counts()
	s.SortedPending, s.SortedKeys, s.SortedBatches, s.SortedLeased, s.SortedDead = sc.Pending, sc.Keys, sc.Batches, sc.Leased, sc.Dead
	oldest, ok = st.table.MinEnqueuedAt()
	if at, found := st.sorted.MinPublishedAt(); found && (!ok || at < oldest) {
		oldest, ok = at, true
	}
	return oldest, ok
}

// statsTail fills what Stats reads without a lock: the oldest
// never-delivered message's time (pending of them from cursor on), the
// log's sizes and positions, the background failures. It reports whether
// it is done with the oldest never-delivered message: found, none to
// find, or its read failed (OldestErr).
func (q *Queue) statsTail(s *Stats, oldest int64, ok bool, cursor uint64, pending int64) bool {
	done := pending == 0
	if !done {
		at, found, err := q.firstPendingAt(cursor)
		if found && (!ok || at < oldest) {
			oldest, ok = at, true
		}
		s.OldestErr, done = err, found || err != nil
	}
	if ok {
		s.OldestEnqueuedAt = time.Unix(0, oldest)
	}
	s.LogBytes, s.Segments = q.log.Size(), q.log.Segments()
	s.LastLSN, s.DurableLSN = q.log.LastLSN(), q.log.DurableLSN()
	q.obs.bg.fill(s)
	return done
}

// firstPendingAt returns the enqueue time of the first enqueue record at or
// after the cursor: the oldest never-delivered message. It finds none, and
// returns no error, when the read stops where a Stats is not to wait
// (pendingReadEnds); it returns the error of any other read, or of a
// record that does not decode.
func (q *Queue) firstPendingAt(cursor uint64) (at int64, found bool, err error) {
	r := q.log.NewReader(cursor)
	defer r.Close()
	for {
		lsn, b, err := r.Next()
		if pendingReadEnds(err) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, wrapCorrupt(fmt.Sprintf("stats: read the oldest never-delivered message from LSN %d", cursor), err)
		}
		if peekOp(b) != opEnqueue {
			continue
		}
		var rec record
		if err := decodeRecord(b, &rec); err != nil {
			return 0, false, withWayOut(fmt.Errorf("queue: stats: record at LSN %d: %w", lsn, err))
		}
		if rec.Due == 0 {
			return rec.At, true, nil
		}
	}
}

// pendingReadEnds reports whether err, of firstPendingAt's read, says the
// record is not there to read rather than that reading it failed: io.EOF,
// the enqueue record is still being written (Stats does not wait for it);
// wal.ErrNotFound, a compaction cut the log past the cursor (liveStats
// counts again, from the index that holds the message now); wal.ErrClosed,
// a Close overtook the read (Stats.Closed says the log fields no longer
// tell).
func pendingReadEnds(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, wal.ErrNotFound) || errors.Is(err, wal.ErrClosed)
}
