package queue

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"time"

	"github.com/walq/walq/index"
	"github.com/walq/walq/wal"
)

// Lost names a message the index held that a salvage dropped because its
// record was lost or is another's (Recovery.Dropped).
type Lost struct {
	Seq uint64 // its sequence number (the LSN of its enqueue or publish record)
	ID  string // its id; a sorted queue's value: its message key
}

// RepairOptions tunes Repair. A nil *RepairOptions means the defaults.
type RepairOptions struct {
	// Backup, when set, is called once the checks found something to
	// repair and before anything changes, with the directory lock held;
	// an error stops the repair with the directory unchanged.
	Backup func() error
	// Options are the options of the salvaging open; Salvage is set
	// whatever they say. Nil means the defaults except that the open
	// keeps every acked id (an unlimited DedupWindow) and dead-letters
	// nothing (a negative MaxDeliveries): the application's window and
	// limit are recorded nowhere, and a repair must not apply others in
	// their place, forgetting for good ids the application's window
	// still holds or dead-lettering messages its limit lets through.
	// Pass the application's own options to apply them instead. Their
	// FS is the one the checks before and after the salvage read
	// through too, and their LockTimeout is how long Repair waits for
	// the directory's lock.
	Options *Options
}

// RepairReport says what Repair found, did and left.
type RepairReport struct {
	Before   Check    // what the checks found first
	Repaired bool     // a salvage ran (false: nothing to repair, or it failed)
	Recovery Recovery // what the salvaging open cut, skipped, dropped and rewrote
	After    Check    // what the checks found after the salvage
}

// LostLSNs returns the LSN ranges the salvage lost, first and last of each
// (a message's sequence number is the LSN of its enqueue record, so the
// never-delivered messages whose enqueue record was lost are among them;
// one a compaction copied forward is named in Recovery.Dropped instead),
// in order, each LSN in one
// range only: ranges that overlap or touch are one. A range whose last LSN
// is unknown (a torn write's, which ends the log) has 0 there and takes in
// every range after its first; one whose bounds are both unknown is
// [0, 0], listed once, last. Damage that lost no LSN (a torn witness,
// which holds no record: wal.Damage) lists none.
func (r RepairReport) LostLSNs() [][2]uint64 {
	var rs [][2]uint64
	for _, d := range r.Recovery.Log.Salvaged {
		if !lostNone(d) {
			rs = append(rs, [2]uint64{d.FirstLSN, d.LastLSN})
		}
	}
	if t := r.Recovery.Log.Torn; t != nil && t.FirstLSN != 0 && !lostNone(*t) {
		rs = append(rs, [2]uint64{t.FirstLSN, t.LastLSN})
	}
	if r.Recovery.LostBefore > 1 {
		rs = append(rs, [2]uint64{1, r.Recovery.LostBefore - 1})
	}
	return mergeRanges(rs)
}

// lostNone reports whether the damage lost no LSN: its last LSN is the one
// before its first.
func lostNone(d wal.Damage) bool { return d.LastLSN != 0 && d.LastLSN+1 == d.FirstLSN }

// mergeRanges returns the LSN ranges rs sorted by first LSN with those
// that overlap or touch joined (a last LSN of 0 runs to the log's end),
// and [0, 0], the unknown range, once at the end if rs holds it.
func mergeRanges(rs [][2]uint64) [][2]uint64 {
	var out [][2]uint64
	unknown := false
	slices.SortFunc(rs, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	for _, r := range rs {
		switch n := len(out); {
		case r[0] == 0:
			unknown = true
		case n > 0 && (out[n-1][1] == 0 || r[0] <= out[n-1][1]+1):
			if r[1] == 0 || out[n-1][1] == 0 {
				out[n-1][1] = 0
			} else {
				out[n-1][1] = max(out[n-1][1], r[1])
			}
		default:
			out = append(out, r)
		}
	}
	if unknown {
		out = append(out, [2]uint64{0, 0})
	}
	return out
}

// Repair is the explicit salvage of a damaged queue directory. It takes the
// directory lock exclusive and holds it from start to end. It runs the
// checks of Verify (given opts.Options.SegmentSize as
// VerifyOptions.SegmentSize); if the directory is clean it changes nothing.
// Otherwise it calls opts.Backup, raises a format-1 directory's identity
// file to FormatVersion (the salvage writes version-2 entries, which an
// older release would cut), opens the queue with opts.Options and
// Options.Salvage (or, when the checks found nothing but a torn tail and
// the salvage refuses it, without, as the next Open would) (a torn tail is cut, damaged entries are skipped, a
// damaged snapshot is set aside and the state rebuilt from the newest
// older valid snapshot, or from the log alone, the
// live messages in damaged segments are copied past them and those
// segments removed, and messages whose records were lost or are another
// message's are dropped), compacts, closes, and runs the checks again. It
// returns an error wrapping ErrCorrupt if damage remains;
// the report says what was lost either way. A failure to release the
// directory's lock at the end is joined with whatever it returns.
//
// With no opts.Options the salvaging open keeps every acked id and
// dead-letters nothing, whatever window and limit the application's
// opens use (see RepairOptions.Options): the repair changes no policy.
//
// Files walq did not write are never changed: a file in the log directory
// that only has a segment's name makes Repair fail, naming it, and so
// does a tidwall/wal END file or a START file without a valid entry
// (Check.Foreign), before the backup. So does walq's own NAME.FRONT
// truncation marker when its truncation would remove records the snapshot
// needs, or, beside a damaged newest snapshot, records of what the salvage
// falls back to (Check.Front, a marker from a later moment; the error
// wraps ErrLaterFront), as the salvage refuses it (Options.Salvage):
// finishing it would lose those records, where moving it out of the log
// directory keeps every segment.
func Repair(dir string, opts *RepairOptions) (RepairReport, error) {
	return repair(dir, opts, unlockDir)
}

// repair is Repair, releasing the directory's lock with release
// (unlockDir; a white-box test's seam where it fails).
func repair(dir string, opts *RepairOptions, release func(*dirLock) error) (_ RepairReport, err error) {
	var o RepairOptions
	if opts != nil {
		o = *opts
	}
	var rep RepairReport
	if o.Options != nil { // refused now, not after the backup
		if _, err := o.Options.withDefaults(); err != nil {
			return rep, err
		}
	}
	lock, err := lockDir(dir, 0o600, true, lockTimeout(o.Options))
	if err != nil {
		return rep, err
	}
	defer func() { err = errors.Join(err, release(lock)) }() // a lock still held is no repair the caller may build on
	// 1. What is wrong, changing nothing.
	if rep.Before, err = examine(repairFS(o.Options), dir, segmentSize(o.Options)); err != nil && !errors.Is(err, ErrCorrupt) {
		return rep, err
	}
	if rep.Before.Clean() {
		return rep, nil
	}
	if len(rep.Before.Foreign) > 0 || rep.Before.Front != "" { // no salvage changes it, or it loses what moving it out keeps: refuse before the backup
		return rep, fmt.Errorf("%w; %s was not changed", rep.Before.err(), dir)
	}
	if rep.Before.SizeUnknown() { // given no SegmentSize: a salvage not given it refuses it too
		return rep, fmt.Errorf("%w; %s was not changed: repair with the application's Options, SegmentSize included", rep.Before.err(), dir)
	}
	// 2. The backup, before anything changes.
	if o.Backup != nil {
		if err := o.Backup(); err != nil {
			return rep, fmt.Errorf("queue: repair: backup: %w; %s was not changed", err, dir)
		}
	}
	// 3. The identity file raised to FormatVersion, as a writable Open
	//    does, before the salvage writes entries of version 2.
	if err := raiseFormat(dir, salvageOptions(o.Options)); err != nil {
		return rep, fmt.Errorf("queue: repair: %w", err)
	}
	// 4. The salvage, under the lock this call holds. A salvage refuses
	//    some torn ends a plain Open cuts (whose LSNs nothing bounds, and
	//    whose bytes may be a synced entry's rot); when the checks found
	//    nothing but a torn tail, which Verify says the next Open cuts,
	//    the repair does what that Open does.
	rep.Recovery, err = salvageLocked(dir, salvageOptions(o.Options), true)
	if err != nil && errors.Is(err, ErrCorrupt) && rep.Before.Damaged() == 0 {
		// Should that open fail too, the salvage's error is returned: it
		// says what to do, where the open's would point back to Repair.
		if rec, perr := salvageLocked(dir, salvageOptions(o.Options), false); perr == nil {
			rep.Recovery, err = rec, nil
		}
	}
	if err != nil {
		return rep, fmt.Errorf("queue: repair: %w", err)
	}
	rep.Repaired = true
	// 5. The checks again: the queue must now open clean.
	if rep.After, err = examine(repairFS(o.Options), dir, segmentSize(o.Options)); err != nil {
		return rep, fmt.Errorf("queue: repair: damage remains after the salvage: %w", err)
	}
	if t := rep.After.Log.Torn; t != nil {
		return rep, fmt.Errorf("%w: repair: a torn tail remains after the salvage: %s", ErrCorrupt, t)
	}
	return rep, nil
}

// raiseFormat rewrites dir's identity file as FormatVersion when it says
// an older format (the caller holds the exclusive lock): a repair writes
// entries of version 2, which an older release, taking the directory for
// its own, would cut as a torn tail. A directory without an identity file
// keeps none: whether a sorted one is windowed cannot be read from it, so
// the first Open records its kind (checkIdentity).
func raiseFormat(dir string, opts *Options) error {
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	have, err := readIdentity(o.FS, dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case have.Format >= FormatVersion:
		return nil
	}
	have.Format = FormatVersion
	return writeIdentity(o.fs(), dir, have, o.FileMode)
}

// segmentSize returns the SegmentSize o gives, 0 when o is nil or gives
// none: the writer's, as far as Repair is told.
func segmentSize(o *Options) int64 {
	if o == nil {
		return 0
	}
	return o.SegmentSize
}

// repairFS returns the file system o gives, nil (the real one) when o is
// nil: Repair's checks read through the one its salvage works through.
func repairFS(o *Options) wal.FS {
	if o == nil {
		return nil
	}
	return o.FS
}

// lockTimeout returns how long Repair waits for the directory's lock:
// o's LockTimeout, or no wait without options.
func lockTimeout(o *Options) time.Duration {
	if o == nil {
		return 0
	}
	return o.LockTimeout
}

// salvageOptions returns the options of Repair's salvaging open: o, or
// when o is nil the options that keep every acked id and dead-letter
// nothing (see RepairOptions.Options).
func salvageOptions(o *Options) *Options {
	if o != nil {
		return o
	}
	return &Options{DedupWindow: math.MaxInt64, MaxDeliveries: -1}
}

// salvageLocked opens the queue in dir, with Salvage when salvage is
// set (a plain open otherwise, whatever opts say), compacts and closes
// it; the caller holds the directory lock. The queue holds no lock of its
// own (a nil lock), so that its Close leaves the caller's lock in place.
func salvageLocked(dir string, opts *Options, salvage bool) (Recovery, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return Recovery{}, err
	}
	o.Salvage = salvage
	q, err := open(dir, o, nil)
	if err != nil {
		return Recovery{}, wayOutFor(o, err)
	}
	rec := q.Recovery()
	err = q.Compact()
	cerr := q.Close()
	if p := q.log.Err(); p != nil && errors.Is(err, p) && errors.Is(cerr, p) {
		cerr = nil // the poison Compact reported, which Close returns again
	}
	return rec, errors.Join(err, cerr)
}

// lostBelow returns the indexed messages and sorted values whose record,
// below target, can no longer be read, by Seq: a salvage drops them. It reads
// without the lock; Open calls it before anything else runs.
func (q *Queue) lostBelow(target uint64) []Lost {
	q.mu.Lock()
	var es []index.Entry
	q.mu.st.table.Ascend(func(e index.Entry) bool {
		if e.Loc < target {
			es = append(es, e)
		}
		return true
	})
	var vs []index.SortedValue
	q.mu.st.sorted.Values(func(v index.SortedValue) bool {
		if v.Loc < target {
			vs = append(vs, v)
		}
		return true
	})
	q.mu.Unlock()
	var out []Lost
	for _, e := range es {
		if _, err := q.log.Read(e.Loc); errors.Is(err, wal.ErrNotFound) {
			out = append(out, Lost{Seq: e.Seq, ID: e.ID})
		}
	}
	for _, v := range vs {
		if _, err := q.log.Read(v.Loc); errors.Is(err, wal.ErrNotFound) {
			out = append(out, Lost{Seq: v.Seq, ID: v.Key})
		}
	}
	slices.SortStableFunc(out, func(a, b Lost) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}
