package queue

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/walq/walq/index"
	"github.com/walq/walq/recovery"
	"github.com/walq/walq/wal"
)

// logDir is the sub-directory that holds the log segments.
const logDir = "log"

// Open opens the queue in dir, creating it if needed. A nil opts means the
// defaults. Open takes the directory's lock (ErrLocked if another process
// holds it), loads the newest snapshot, repairs a torn log tail, replays
// the log after the snapshot and, if the previous process crashed, makes
// every message it had leased ready again.
func Open(dir string, opts *Options) (*Queue, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.ReadOnly {
		return openInspect(dir, o, o.ident)
	}
	if err := wal.MkdirAll(o.FS, dir, o.DirMode); err != nil {
		return nil, fmt.Errorf("queue: create %s: %w", dir, err)
	}
	lock, err := lockDir(dir, o.FileMode, true)
	if err != nil {
		return nil, err
	}
	id, err := checkIdentity(dir, o)
	var q *Queue
	if err == nil {
		q, err = open(dir, o, lock)
	}
	if err != nil {
		unlockDir(lock)
		return nil, withWayOut(err)
	}
	q.ident = id
	return q, nil
}

func open(dir string, o Options, lock *dirLock) (*Queue, error) {
	start := o.Clock.Now()
	q := &Queue{dir: dir, opts: o, lockFile: lock, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	// 1. The newest snapshot, if any (a salvaging open sets a damaged one
	//    aside and rebuilds the state from the log).
	st, snapLSN, err := q.loadSnapshot()
	if err != nil {
		return nil, err
	}
	// 2. The log, with its torn tail repaired. It must reach the snapshot:
	//    a log that ends before it lost records (wal.Options.MustReach).
	q.log, err = wal.Open(filepath.Join(dir, logDir), q.walOptions(snapLSN+1, q.recovery.mustReach(snapLSN)))
	if err != nil {
		return nil, wrapCorrupt("open log", err)
	}
	if err := q.recover(st, snapLSN); err != nil {
		q.log.Close()
		return nil, err
	}
	q.recovery.Duration = o.Clock.Now().Sub(start)
	q.logRecovery()
	q.wg.Add(1)
	go q.housekeep()
	return q, nil
}

func (q *Queue) walOptions(start, reach uint64) *wal.Options {
	o := &wal.Options{
		SegmentSize:  q.opts.SegmentSize,
		Sync:         q.opts.Sync,
		SyncInterval: q.opts.SyncInterval,
		// A payload plus its record fields and headers.
		MaxRecordSize: q.opts.MaxMessageSize + 1<<20,
		Salvage:       q.opts.Salvage,
		FileMode:      q.opts.FileMode,
		DirMode:       q.opts.DirMode,
		StartLSN:      start,
		MustReach:     reach,
		Locked:        true, // by the queue's lock on its directory
		FS:            q.opts.FS,
	}
	if q.opts.logOptions != nil {
		q.opts.logOptions(o)
	}
	return o
}

// recover replays the log after the snapshot into st and installs it.
func (q *Queue) recover(st *state, snapLSN uint64) error {
	// 3. The log must reach back to the snapshot, and to the oldest record
	// the snapshot's messages need (a payload, a pending message), which is
	// where the truncation after the snapshot stopped: a lost front segment
	// must not open as a queue whose messages fail at delivery or are
	// skipped. (A salvaging open drops what was lost instead.)
	from, err := q.checkCoverage(st, snapLSN)
	if err != nil {
		return err
	}
	// 4. Replay every record after the snapshot. A salvaging open skips the
	// records that no longer apply because others were lost.
	skipped := 0
	n, err := recovery.Replay(q.log, from, func(lsn uint64, b []byte) error {
		var r record
		err := decodeRecord(b, &r)
		if err == nil {
			err = st.apply(lsn, &r, len(b))
		}
		if err != nil && q.opts.Salvage {
			skipped++
			st.skip(lsn)
			return nil
		}
		return err
	})
	if err != nil {
		return wrapCorrupt("replay", err)
	}
	q.recovery.SnapshotLSN, q.recovery.Replayed, q.recovery.Skipped = snapLSN, n, skipped
	q.recovery.Clean, q.recovery.Log = st.clean, q.log.Report()
	q.mu.st = st
	q.mu.changed = make(chan struct{})
	q.mu.snapLSN = snapLSN
	q.resetCursorLocked()
	// 5. A crashed process's consumers died with it: their leases end now.
	// After a salvage too: a lease may name a message whose record is lost.
	if !st.clean || q.recovery.damaged() {
		if err := q.requeueCrashed(); err != nil {
			return err
		}
	}
	// 6. After a salvage, copy what lives in damaged segments forward and
	// cut them off, so that the damage is gone from disk.
	return q.rewritePastDamage()
}

// checkCoverage checks that the log holds what the snapshot's state st
// needs: every record after the snapshot, and the records of its messages.
// It returns the LSN replay starts at. A salvaging open accepts a log that
// starts later and notes the records lost (Recovery.LostBefore).
func (q *Queue) checkCoverage(st *state, snapLSN uint64) (uint64, error) {
	first := q.log.FirstLSN()
	need := min(lowWater(st), snapLSN+1)
	if first <= need {
		return snapLSN + 1, nil
	}
	if !q.opts.Salvage {
		return 0, coverageErr(first, snapLSN, need, q.log.Segments())
	}
	q.recovery.LostBefore = first // the records before it are gone
	return max(snapLSN+1, first), nil
}

// coverageErr says why a log that starts at first cannot serve a snapshot
// at snapLSN whose messages need LSN need.
func coverageErr(first, snapLSN, need uint64, segs []wal.SegmentInfo) error {
	where := "the log holds no segment"
	if len(segs) > 0 {
		where = segs[0].Path
	}
	if first > snapLSN+1 {
		what := fmt.Sprintf("snapshot LSN %d", snapLSN)
		if snapLSN == 0 {
			what = "LSN 1 (there is no snapshot: was it deleted?)"
		}
		return fmt.Errorf("%w: log starts at LSN %d (%s), after %s", ErrCorrupt, first, where, what)
	}
	return fmt.Errorf("%w: log starts at LSN %d (%s), but the snapshot's messages need LSN %d: a segment is missing",
		ErrCorrupt, first, where, need)
}

// rewritePastDamage moves every live message out of the segments up to the
// last damaged one, drops those whose records were lost, recounts the
// never-delivered messages and truncates the log past the damage.
func (q *Queue) rewritePastDamage() error {
	target := max(q.pastDamage(), q.recovery.LostBefore)
	if target == 0 {
		return nil
	}
	q.recovery.Dropped = q.lostBelow(target)
	moved, err := q.movePinned(target, true)
	q.recovery.Rewritten = moved
	if err == nil {
		err = q.snapshot()
	}
	if err != nil {
		return fmt.Errorf("queue: rewrite past damaged log: %w", err)
	}
	return nil
}

// pastDamage returns the LSN past the salvaged damage: the first LSN of the
// segment after the last one with damage, and at least the LSN after the
// last record lost (a log that ended before its snapshot resumes there);
// 0 when nothing was damaged.
func (q *Queue) pastDamage() uint64 {
	damaged := map[string]bool{}
	var target uint64
	for _, d := range q.recovery.Log.Salvaged {
		damaged[d.Segment] = true
		if d.LastLSN != 0 {
			target = max(target, min(d.LastLSN+1, q.log.LastLSN()+1))
		}
	}
	segs := q.log.Segments()
	for i := 0; i+1 < len(segs); i++ {
		if !damaged[segs[i].Path] {
			continue
		}
		next := segs[i+1].FirstLSN
		if next == 0 { // the empty tail a loss at the end resumes in
			next = q.log.LastLSN() + 1
		}
		target = max(target, next)
	}
	return target
}

// resetCursorLocked points the cursor's reader at the cursor. The log may
// start after the cursor: compaction cuts past it when nothing after it is
// live, so reading starts where the log does.
func (q *Queue) resetCursorLocked() {
	if q.mu.cursor != nil {
		q.mu.cursor.Close()
	}
	q.mu.cursor = q.log.NewReader(max(q.mu.st.cursor, q.log.FirstLSN()))
}

// closeCursor releases the cursor's reader and the segment file it pins;
// Close calls it once nothing reads at the cursor any more.
func (q *Queue) closeCursor() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.cursor != nil {
		q.mu.cursor.Close()
	}
}

// requeueCrashed ends every lease left by a crashed process: the message is
// ready again, or dead if it has had MaxDeliveries.
func (q *Queue) requeueCrashed() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range leasedEntries(q.mu.st.table) {
		r := q.endLease(e, "process crashed while the message was leased")
		if r.Op == opDead {
			q.recovery.DeadOnOpen++
		}
		if _, err := q.appendLocked(r, nil); err != nil {
			return err
		}
		q.recovery.Requeued++
	}
	for _, b := range q.mu.st.sorted.Expired(math.MaxInt64, math.MaxInt) {
		r := q.returnBatch(b, q.now(), "process crashed while the batch was leased")
		if _, err := q.appendLocked(r, nil); err != nil {
			return err
		}
		q.recovery.Requeued++
	}
	return nil
}

// endLease returns the record that ends the lease of e without an ack:
// expire, or dead once e has had MaxDeliveries.
func (q *Queue) endLease(e index.Entry, why string) *record {
	if q.opts.MaxDeliveries > 0 && int(e.Deliveries) >= q.opts.MaxDeliveries {
		return &record{Op: opDead, Seq: e.Seq, Lease: e.Lease, At: q.now(),
			Reason: fmt.Sprintf("%d deliveries; last: %s", e.Deliveries, why)}
	}
	return &record{Op: opExpire, Seq: e.Seq, Lease: e.Lease, At: q.now()}
}

// loadSnapshot returns the state of the newest snapshot in the queue's
// directory and its LSN, or a new state when there is none. A salvaging
// open sets a damaged snapshot aside (Recovery.SnapshotLost) and starts
// from a new state: replay rebuilds what the log still holds.
func (q *Queue) loadSnapshot() (*state, uint64, error) {
	st, lsn, err := loadSnapshot(q.dir, &q.opts)
	if err == nil || !q.opts.Salvage || !errors.Is(err, ErrCorrupt) {
		return st, lsn, err
	}
	infos, lerr := recovery.ListFS(q.opts.FS, q.dir)
	if lerr != nil || len(infos) == 0 {
		return nil, 0, err
	}
	q.recovery.SnapshotLost = infos[len(infos)-1]
	return newState(&q.opts), 0, nil
}

// loadSnapshot returns the state of the newest snapshot in dir, or a new
// state when there is none.
func loadSnapshot(dir string, o *Options) (*state, uint64, error) {
	info, body, err := recovery.LatestFS(o.FS, dir)
	if errors.Is(err, recovery.ErrNoSnapshot) {
		return newState(o), 0, nil
	}
	if err != nil {
		return nil, 0, wrapCorrupt("load snapshot", err)
	}
	st, err := decodeState(body, o)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", info.Path, err)
	}
	if st.last != info.LSN {
		return nil, 0, fmt.Errorf("%w: %s reflects LSN %d", ErrCorrupt, info.Path, st.last)
	}
	return st, info.LSN, nil
}

// wrapCorrupt adds ErrCorrupt to an error that is a corruption of the log
// or of a snapshot, so that callers need test only queue.ErrCorrupt, and
// names the way out.
func wrapCorrupt(what string, err error) error {
	if errors.Is(err, ErrCorrupt) {
		return withWayOut(fmt.Errorf("queue: %s: %w", what, err))
	}
	if errors.Is(err, wal.ErrCorrupt) || errors.Is(err, recovery.ErrCorrupt) {
		return withWayOut(fmt.Errorf("%w: %s: %w", ErrCorrupt, what, err))
	}
	return fmt.Errorf("queue: %s: %w", what, err)
}

// wayOut is what every ErrCorrupt says last: the way out.
const wayOut = "to recover, run 'walq repair DIR' (it backs the directory up, then salvages what is left) " +
	"or open with Options.Salvage; 'walq verify DIR' lists the damage"

// withWayOut names the way out in an error that wraps ErrCorrupt, once.
func withWayOut(err error) error {
	if err == nil || !errors.Is(err, ErrCorrupt) || strings.Contains(err.Error(), "walq repair") {
		return err
	}
	return fmt.Errorf("%w; %s", err, wayOut)
}
