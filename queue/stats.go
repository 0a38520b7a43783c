package queue

import (
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
	// when there is none.
	OldestEnqueuedAt time.Time
	DedupIDs         int // producer-given ids remembered for dedup

	LiveBytes   int64 // log bytes the live messages need
	LogBytes    int64 // bytes of all log segments
	Segments    []wal.SegmentInfo
	SnapshotLSN uint64        // LSN of the last snapshot; 0 when none
	SnapshotAt  time.Time     // when this process took it; zero if it did not
	LastLSN     uint64        // LSN of the last record appended
	DurableLSN  uint64        // LSN of the last record fsynced
	Sync        SyncMode      // the fsync policy
	AckTimeout  time.Duration // the lease length

	// Background work (lease requeue, snapshots, compaction, copy-forward)
	// that fails is retried with backoff and logged through Options.Logger.
	BackgroundErr    error     // the last failure; nil once every job that failed has succeeded since
	BackgroundErrAt  time.Time // when it happened; kept after it clears
	BackgroundErrors uint64    // failures since Open
}

// Stats returns counts, sizes and log positions. It reads the oldest
// never-delivered message's record from the log; a sorted queue's oldest
// value comes from its index in O(log n), after a scan of the pending
// values of each key whose oldest was dead-lettered or dropped on its own
// since the last call.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	st := q.mu.st
	now := q.now()
	st.table.Promote(now)
	st.sorted.Release(now) // keys whose nack delay has passed count as pullable
	c2 := st.table.Counts()
	s := Stats{
		Ready: st.pending + int64(c2.Ready), Delayed: int64(c2.Delayed), InFlight: int64(c2.Leased), Dead: int64(c2.Dead),
		Enqueued: st.counts.Enqueued, Delivered: st.counts.Delivered, Acked: st.counts.Acked, Nacked: st.counts.Nacked,
		Expired: st.counts.Expired, DeadLettered: st.counts.DeadLettered, Moved: st.counts.Moved,
		DedupIDs: st.dedup.Len(), LiveBytes: st.liveBytes(), SnapshotLSN: q.mu.snapLSN, SnapshotAt: q.mu.snapAt,
		Sync: q.opts.Sync, AckTimeout: q.opts.AckTimeout,
		Published: st.counts.Published, Pulled: st.counts.Pulled, BatchesAcked: st.counts.BatchesAcked,
		At: time.Unix(0, now), Closed: q.mu.closed,
	}
	sc := st.sorted.Counts()
	s.SortedPending, s.SortedKeys, s.SortedBatches, s.SortedLeased, s.SortedDead = sc.Pending, sc.Keys, sc.Batches, sc.Leased, sc.Dead
	oldest, ok := st.table.MinEnqueuedAt()
	if at, found := st.sorted.MinPublishedAt(); found && (!ok || at < oldest) {
		oldest, ok = at, true
	}
	cursor, pending := st.cursor, st.pending
	q.mu.Unlock()
	if pending > 0 {
		if at, found := q.firstPendingAt(cursor); found && (!ok || at < oldest) {
			oldest, ok = at, true
		}
	}
	if ok {
		s.OldestEnqueuedAt = time.Unix(0, oldest)
	}
	s.LogBytes, s.Segments = q.log.Size(), q.log.Segments()
	s.LastLSN, s.DurableLSN = q.log.LastLSN(), q.log.DurableLSN()
	q.obs.bg.fill(&s)
	return s
}

// firstPendingAt returns the enqueue time of the first enqueue record at or
// after the cursor; the oldest never-delivered message.
func (q *Queue) firstPendingAt(cursor uint64) (int64, bool) {
	r := q.log.NewReader(cursor)
	defer r.Close()
	for {
		_, b, err := r.Next()
		if err != nil {
			return 0, false
		}
		if peekOp(b) != opEnqueue {
			continue
		}
		var rec record
		if decodeRecord(b, &rec) != nil {
			return 0, false
		}
		if rec.Due == 0 {
			return rec.At, true
		}
	}
}
