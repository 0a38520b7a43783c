package queue

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	"github.com/walq/walq/index"
	"github.com/walq/walq/recovery"
	"github.com/walq/walq/wal"
)

// logDir is the sub-directory that holds the log segments.
const logDir = "log"

// Open opens the queue in dir, creating it if needed. A nil opts means the
// defaults. Open takes the directory's lock (ErrLocked if another process
// holds it, at once or once Options.LockTimeout has passed), loads the newest snapshot, repairs a torn log tail, replays
// the log after the snapshot and, if the previous process crashed, makes
// every message it had leased ready again.
func Open(dir string, opts *Options) (*Queue, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.ReadOnly {
		q, err := openInspect(dir, o, o.ident)
		return q, wayOutFor(o, err)
	}
	if err := wal.MkdirAll(o.FS, dir, o.DirMode); err != nil {
		return nil, fmt.Errorf("queue: create %s: %w", dir, err)
	}
	lock, err := lockDir(dir, o.FileMode, true, o.LockTimeout)
	if err != nil {
		return nil, err
	}
	id, err := checkIdentity(dir, o)
	var q *Queue
	if err == nil {
		q, err = open(dir, o, lock)
	}
	if err != nil {
		return nil, errors.Join(wayOutFor(o, err), o.unlock(lock))
	}
	q.ident = id
	return q, nil
}

func open(dir string, o Options, lock *dirLock) (*Queue, error) {
	start := o.Clock.Now()
	q := &Queue{dir: dir, opts: o, lockFile: lock, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	if _, ok := o.Clock.(systemClock); ok {
		q.wall = newWallClock(cmp.Or(o.wallResync, wallResync))
	}
	// The procedure is recovery's: snapshot, log, replay, the leases of a
	// crashed process, a salvage's rewrite (see package recovery).
	log, rep, err := recovery.Recover(o.FS, dir, newRecoverer(q), o.Salvage)
	if err != nil && !o.Salvage { // a damaged snapshot beside a marker a repair refuses: the marker first
		err = frontBeside(o.FS, dir, o.logSegmentSize(), err)
	}
	if err != nil && !errors.Is(err, ErrCorrupt) { // the queue's own errors say where already
		err = wrapCorrupt("open", err)
	}
	if err != nil {
		return nil, err
	}
	q.log = log
	q.recovery.fill(rep)
	if o.Salvage {
		if err := q.dropMisplaced(); err != nil {
			return nil, errors.Join(err, log.Close())
		}
	}
	q.recovery.Duration = o.Clock.Now().Sub(start)
	q.logRecovery()
	q.wg.Add(1)
	go q.housekeep()
	return q, nil
}

func (q *Queue) walOptions(start, reach uint64) *wal.Options {
	o := &wal.Options{
		SegmentSize:  q.opts.logSegmentSize(),
		Sync:         q.opts.Sync,
		SyncInterval: q.opts.SyncInterval,
		// The log takes records of any size it can hold: a copy forward
		// of a message enqueued under a larger MaxMessageSize, or a few
		// bytes longer than an enqueue record at the limit, must not be
		// refused. New messages are held to checkRecordSize's limit.
		MaxRecordSize: maxLogRecord,
		Salvage:       q.opts.Salvage,
		FileMode:      q.opts.FileMode,
		DirMode:       q.opts.DirMode,
		StartLSN:      start,
		MustReach:     reach,
		Locked:        true, // by the queue's lock on its directory
		FS:            q.opts.FS,
		AppendOnly:    q.opts.AppendOnly,
	}
	if q.opts.logOptions != nil {
		q.opts.logOptions(o)
	}
	return o
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

// endLease returns the record that ends the lease of e without an ack:
// expire, or dead once e has had MaxDeliveries (pastLimit).
func (q *Queue) endLease(e index.Entry, why string) *record {
	if q.pastLimit(e.Deliveries) {
		return &record{Op: opDead, Seq: e.Seq, Lease: e.Lease, At: q.now(),
			Reason: fmt.Sprintf("%d deliveries; last: %s", e.Deliveries, why)}
	}
	return &record{Op: opExpire, Seq: e.Seq, Lease: e.Lease, At: q.now()}
}

// wrapCorrupt adds ErrCorrupt to an error that is a corruption of the log
// or of a snapshot, so that callers need test only queue.ErrCorrupt, and
// names the way out.
func wrapCorrupt(what string, err error) error {
	if errors.Is(err, ErrCorrupt) {
		return withWayOut(fmt.Errorf("queue: %s: %w", what, err))
	}
	if errors.Is(err, wal.ErrCorrupt) || errors.Is(err, recovery.ErrCorrupt) || errors.Is(err, recovery.ErrLogMissing) {
		return withWayOut(fmt.Errorf("%w: %s: %w", ErrCorrupt, what, err))
	}
	return fmt.Errorf("queue: %s: %w", what, err)
}

// wayOut is what every ErrCorrupt says last: the way out.
const wayOut = "to recover, run 'walq repair DIR' (it backs the directory up, then salvages what is left) " +
	"or open with Options.Salvage; 'walq verify DIR' lists the damage"

// salvagedWayOut is what an ErrCorrupt of an open that salvaged says
// last instead: neither a salvage nor 'walq repair', which salvages the
// same way, passes that damage.
const salvagedWayOut = "the salvage cannot pass this damage: do what the error says, " +
	"or restore DIR from a backup; 'walq verify DIR' lists the damage"

// withWayOut names the way out in an error that wraps ErrCorrupt, once;
// not in one about a file walq never writes (wal.ErrForeign), which no
// repair or salvage changes, nor in one that only the writer's segment
// size can settle (wal.ErrSegmentSizeUnknown), which a repair or salvage
// not given it refuses: those errors name their own way out.
func withWayOut(err error) error {
	if err == nil || !errors.Is(err, ErrCorrupt) || errors.Is(err, wal.ErrForeign) || errors.Is(err, wal.ErrSegmentSizeUnknown) ||
		strings.Contains(err.Error(), "walq repair") ||
		strings.Contains(err.Error(), salvagedWayOut) {
		return err
	}
	return fmt.Errorf("%w; %s", err, wayOut)
}

// wayOutFor names the way out in an error of an open with o that wraps
// ErrCorrupt: that of withWayOut, or salvagedWayOut when o salvaged.
func wayOutFor(o Options, err error) error {
	if !o.Salvage || err == nil || !errors.Is(err, ErrCorrupt) {
		return withWayOut(err)
	}
	return &salvagedError{err: err, msg: withoutWayOut(err) + "; " + salvagedWayOut}
}

// salvagedError is err, whose text names salvagedWayOut in place of
// wayOut.
type salvagedError struct {
	err error  // what the open returned, wrapping ErrCorrupt
	msg string // its text, with salvagedWayOut
}

func (e *salvagedError) Error() string { return e.msg }
func (e *salvagedError) Unwrap() error { return e.err }

// withoutWayOut is the text of err without the way out withWayOut named
// in it, for a list of errors that names the way out once, after them.
func withoutWayOut(err error) string {
	return strings.ReplaceAll(err.Error(), "; "+wayOut, "")
}
