package queue

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/walq/walq/recovery"
	"github.com/walq/walq/wal"
)

// liveTries is how many times a read-only open beside a running queue
// tries to read it when a try fails with no compaction of that queue in
// between (see replayLive).
const liveTries = 5

// liveOvertaken is how many tries of a read-only open beside a running
// queue that queue's compactions may overtake before the open gives up.
const liveOvertaken = 100

// openInspect opens dir for inspection (Options.ReadOnly): the newest
// snapshot and the log after it are replayed into memory and nothing is
// written, created or repaired. It takes the directory's lock shared, so
// that no queue starts writing while it reads; if a queue holds the lock,
// it reads the files anyway and InUse reports that the figures are as of
// that queue's last write to them.
func openInspect(dir string, o Options, want Identity) (*Queue, error) {
	if fi, err := o.fs().Stat(filepath.Join(dir, logDir)); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("queue: %s is not a queue directory (no %s/)", dir, logDir)
	}
	lock, err := lockShared(dir)
	inUse := errors.Is(err, ErrLocked)
	if err != nil && !inUse {
		return nil, err
	}
	q, err := replayLive(dir, o, want, inUse)
	if err != nil {
		return nil, errors.Join(err, o.unlock(lock))
	}
	q.lockFile = lock
	return q, nil
}

// replayLive is replayReadOnly, tried again while the queue is in use
// and a try fails or reads a torn tail (a write in flight, which the
// last try reports as it reads it): up to liveTries times, not counting the tries a
// compaction of the running queue overtook (a newer snapshot appeared
// while it read, so the log it read may have been cut past the snapshot
// it loaded; a salvage preview then shows the front cut as lost,
// Recovery.LostBefore), of which up to liveOvertaken are taken. A queue that
// compacts under every try of those is busy, not damaged: the error then
// wraps ErrLocked, never ErrCorrupt, whose advice (repair) is wrong for a
// healthy queue.
func replayLive(dir string, o Options, want Identity, inUse bool) (*Queue, error) {
	overtaken := 0
	for tries := 0; ; {
		before := newestSnapshot(o.FS, dir)
		q, err := replayReadOnly(dir, o, want, inUse)
		if err == nil && inUse && q.recovery.Log.Torn != nil && tries+1 < liveTries {
			// The running queue writes its entries over the zeros it
			// keeps ahead of its tail (wal, "Zeros ahead of the tail"):
			// a write in flight there reads as a torn tail. Its writer
			// cut any torn tail when it opened the log.
			err = errInFlight
			q.closeReadOnly() // read-only: nothing to lose; err is the try's outcome
		}
		if err == nil && inUse && q.recovery.LostBefore != 0 && newestSnapshot(o.FS, dir) != before {
			// A salvage preview that loaded a snapshot, then read a log
			// a newer compaction had cut past it: the front it misses
			// is the running queue's truncation, not a loss.
			err = errOvertaken
			q.closeReadOnly() // read-only: nothing to lose; err is the try's outcome
		}
		if err == nil || !inUse || errors.Is(err, ErrWrongKind) {
			return q, err
		}
		if newestSnapshot(o.FS, dir) == before {
			if tries++; tries >= liveTries {
				return nil, err
			}
			continue
		}
		if overtaken++; overtaken > liveOvertaken {
			return nil, fmt.Errorf("queue: %s: the running queue compacted its log under %d reads in a row (%w); try again: %v",
				dir, overtaken, ErrLocked, err)
		}
	}
}

// errInFlight is a try of replayLive that read a torn tail, retried.
var errInFlight = errors.New("queue: the log's tail was being written")

// errOvertaken is a try of replayLive whose log a compaction of the
// running queue cut past the snapshot it loaded, retried.
var errOvertaken = errors.New("queue: the running queue compacted the log under the read")

// newestSnapshot returns the LSN of dir's newest snapshot, 0 when it has
// none or cannot be listed (a try that fails then is counted as one).
func newestSnapshot(fsys wal.FS, dir string) uint64 {
	infos, err := recovery.ListFS(fsys, dir)
	if err != nil || len(infos) == 0 {
		return 0
	}
	return infos[len(infos)-1].LSN
}

// replayReadOnly builds the queue's state from the files as they are.
func replayReadOnly(dir string, o Options, want Identity, inUse bool) (*Queue, error) {
	q := &Queue{dir: dir, opts: o, inUse: inUse, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	id, err := q.checkIdentityReadOnly(want)
	if err != nil {
		return nil, err
	}
	q.ident = id
	st, snapLSN, lost, err := loadInspected(dir, &o)
	if err != nil && !o.Salvage { // as Open: a marker a repair refuses first
		err = frontBeside(o.FS, dir, o.logSegmentSize(), err)
	}
	if err == nil && o.Salvage { // as the salvage: a marker from a later moment refused before the log opens
		err = salvageFront(o.FS, dir, o.logSegmentSize(), decoder{&o}, st, snapLSN+1, max(snapLSN, lost.LSN))
	}
	if err != nil {
		return nil, err
	}
	q.log, err = wal.Open(filepath.Join(dir, logDir), inspectLogOptions(o, snapLSN, lost))
	if err != nil {
		return nil, q.laterFrontOr(st, snapLSN, wrapCorrupt("open log", err))
	}
	q.recovery.SnapshotLost = lost
	st, snapLSN, err = q.loadOlder(st, snapLSN, lost)
	if err == nil {
		err = q.replayInto(st, snapLSN)
		if errors.Is(err, recovery.ErrLogMissing) { // refused before any record applied: st is as loaded
			err = q.laterFrontOr(st, snapLSN, err)
		}
	}
	if err == nil && o.Salvage {
		err = q.showLeaseEnds()
	}
	if err == nil && o.Salvage {
		err = q.showMarks()
	}
	if err == nil && o.Salvage {
		err = q.showDrops()
	}
	if err == nil && o.Salvage {
		err = q.showRecount()
	}
	if err == nil {
		err = q.inferReadOnly(want)
	}
	if err != nil {
		q.closeReadOnly() // the error that matters is err
		return nil, err
	}
	return q, nil
}

// laterFrontOr returns, for err, a read-only open's refusal of the log
// after the snapshot at snapLSN, whose state as loaded is st, laterFront's
// error when the log directory holds a truncation marker from a later
// moment than that snapshot: Open refuses it before it finishes it
// (checkFront), and so does a read-only open, with Open's error, not as
// the missing or damaged log it reads as. It returns err otherwise, and
// for a preview, which refused such a marker before it opened the log, as
// the salvage does (salvageFront). Such a
// marker always makes the log's read-only open or its coverage
// (recovery.Coverage) fail, since both see the log from the marker on:
// so the directory is read for a marker only then, and a clean read-only
// open pays nothing for it.
func (q *Queue) laterFrontOr(st *state, snapLSN uint64, err error) error {
	if q.opts.Salvage {
		return err
	}
	o := &q.opts
	if ferr := laterFront(o.FS, filepath.Join(q.dir, logDir), o.logSegmentSize(), st, snapLSN+1, loadedFrom{lsn: snapLSN}); ferr != nil {
		return ferr
	}
	return err
}

// loadInspected returns the state of the newest snapshot in dir and its
// LSN, as loadSnapshot does; a salvaging inspection (the preview) sets a
// damaged snapshot aside as the salvage does (recovery.LoadSalvaging) and
// returns its Info.
func loadInspected(dir string, o *Options) (*state, uint64, recovery.Info, error) {
	if !o.Salvage {
		st, lsn, err := loadSnapshot(dir, o)
		return st, lsn, recovery.Info{}, err
	}
	st, lsn, lost, err := recovery.LoadSalvaging(o.FS, dir, decoder{o})
	if err != nil {
		return nil, 0, lost, wrapCorrupt("load snapshot", err)
	}
	return st.(*state), lsn, lost, nil
}

// loadOlder returns, for a salvaging inspection that set the damaged
// snapshot lost aside, the state and LSN of the newest valid older
// snapshot, as the salvage falls back to it (recovery.LoadOlder); st and
// snapLSN otherwise.
func (q *Queue) loadOlder(st *state, snapLSN uint64, lost recovery.Info) (*state, uint64, error) {
	if lost.Path == "" {
		return st, snapLSN, nil
	}
	older, lsn, err := recovery.LoadOlder(q.opts.FS, q.dir, decoder{&q.opts}, lost)
	if err != nil {
		return nil, 0, wrapCorrupt("load snapshot", err)
	}
	return older.(*state), lsn, nil
}

// inspectLogOptions are the options of a read-only open's log after the
// snapshot at snapLSN (or the damaged snapshot lost, set aside), those of
// the writable open (recovery.Recover): records from snapLSN+1, and it
// must reach the snapshot's LSN, or the lost one's. A log that ends before
// it lost synced records: a plain read-only open refuses it with
// ErrCorrupt as the writable open does (it would otherwise take the loss
// for a torn tail and count messages whose records are gone), and a
// preview shows the salvage's loss. With the queue's SegmentSize when
// given (logSegmentSize), by which the log tells a torn roll from a
// missing segment. Read through the queue's FS, as the writable open
// reads.
func inspectLogOptions(o Options, snapLSN uint64, lost recovery.Info) *wal.Options {
	return &wal.Options{ReadOnly: true, Salvage: o.Salvage, MaxRecordSize: o.MaxMessageSize + 1<<20, SegmentSize: o.logSegmentSize(),
		StartLSN: snapLSN + 1, MustReach: max(snapLSN, lost.LSN), FS: o.FS}
}

// replayInto applies the log after the snapshot to st and installs it.
// Without Salvage the log must reach back to the snapshot and to every
// record its messages need, as the writable open checks (recovery.Coverage):
// a lost front segment is ErrCorrupt, never a queue that counts messages
// whose records are gone.
func (q *Queue) replayInto(st *state, snapLSN uint64) error {
	if _, err := recovery.Coverage(q.log, st, snapLSN); err != nil && !q.opts.Salvage {
		return wrapCorrupt("open", err)
	}
	lostBefore := q.lostFront(st, snapLSN)
	skipped := 0
	n, err := recovery.Replay(q.log, max(snapLSN+1, q.log.FirstLSN()), func(lsn uint64, b []byte) error {
		err := st.Apply(lsn, b)
		if err != nil && q.opts.Salvage { // as the salvage skips it (recovery.Recover)
			skipped++
			st.Skip(lsn)
			return nil
		}
		return err
	})
	if err != nil {
		return wrapCorrupt("replay", err)
	}
	q.recovery = Recovery{SnapshotLSN: snapLSN, Replayed: n, Skipped: skipped, Clean: st.clean, Log: q.log.Report(),
		LostBefore: lostBefore, SnapshotLost: q.recovery.SnapshotLost}
	q.mu.st = st
	q.mu.changed = make(chan struct{})
	q.mu.snapLSN = snapLSN
	q.resetCursorLocked()
	return nil
}

// lostFront returns, for a read-only salvaging open, where the log starts
// when it lacks records that st, loaded from the snapshot at snapLSN,
// needs (Recovery.LostBefore, as a salvage reports it); 0 otherwise.
func (q *Queue) lostFront(st *state, snapLSN uint64) uint64 {
	if !q.opts.Salvage {
		return 0
	}
	if _, err := recovery.Coverage(q.log, st, snapLSN); errors.Is(err, recovery.ErrLogMissing) {
		return q.log.FirstLSN()
	}
	return 0
}

// InUse reports whether a read-only queue (Options.ReadOnly) was opened
// while another process had the directory open for writing. Its figures
// are then as of that process's last write to the files, which may trail
// what its callers were told by up to its sync interval.
func (q *Queue) InUse() bool { return q.inUse }

// closeReadOnly closes a read-only queue: the log's files and the shared
// lock; nothing is written.
func (q *Queue) closeReadOnly() error {
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	q.mu.closed = true
	if q.mu.changed != nil {
		q.broadcastLocked()
	}
	if q.mu.cursor != nil {
		q.mu.cursor.Close()
	}
	q.mu.Unlock()
	return errors.Join(q.log.Close(), q.opts.unlock(q.lockFile))
}
