package queue

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/walq/walq/recovery"
	"github.com/walq/walq/wal"
)

// Check is what Verify found.
type Check struct {
	Snapshot *recovery.Info // the snapshot checked; nil when none (or damaged)
	Log      wal.Report     // the log's torn tail (repairable) and damaged regions
	Records  int            // records replayed after the snapshot
	// Problems lists damage outside the log's entries, each with where it
	// is: a damaged snapshot, a log that does not reach back to what the
	// snapshot needs, a record that does not replay.
	Problems []string
	// Foreign lists the files in the log directory that walq never writes
	// and that neither Repair nor a salvage changes (a tidwall/wal END
	// file, a START file that is no copy of the log's entries, a last file
	// without a valid entry named inside the segment before it), each with
	// what to do: move it out of the log directory.
	Foreign []string
	// Front is set when the log directory holds walq's own NAME.FRONT
	// truncation marker whose truncation would remove records the
	// snapshot needs: a marker from a later moment than the snapshot (a
	// directory put back from copies made at different times), which Open
	// refuses (ErrLaterFront). When the newest snapshot is damaged (a
	// problem listed in Problems), the marker is compared with what
	// Repair's salvage falls back to instead: the newest valid older
	// snapshot, or the log alone. It names the marker and what to do:
	// move it out of the log directory, and every segment is kept. Repair
	// refuses it, before its backup, as its salvage does: finishing the
	// truncation would lose those records.
	Front string
	// sizeUnknown is set when the log's open refused it with an error
	// wrapping wal.ErrSegmentSizeUnknown, the problem Problems lists last.
	sizeUnknown bool
}

// Clean reports whether Verify found nothing at all, not even a torn tail.
func (c Check) Clean() bool {
	return c.Log.Torn == nil && c.Damaged() == 0
}

// Damaged returns how many problems other than a torn tail Verify found.
func (c Check) Damaged() int {
	n := len(c.Log.Salvaged) + len(c.Problems) + len(c.Foreign)
	if c.Front != "" {
		n++
	}
	return n
}

// VerifyOptions tunes Verify. A nil *VerifyOptions means the defaults.
type VerifyOptions struct {
	// SegmentSize is the Options.SegmentSize the queue was written with.
	// 0, the default, means unknown: a roll a crash tore on an entry
	// boundary then looks like missing segments after a whole one, and
	// Verify says that it cannot tell which (wal.ErrSegmentSizeUnknown,
	// Check.SizeUnknown). Given, Verify tells them apart as the
	// application's Open does: a torn roll is reported in Check.Log.Torn.
	// A size below 4096 is ErrInvalidOptions.
	SegmentSize int64
	// FS is the file system the directory is read through, as
	// Options.FS is the queue's; nil means the real one. The directory
	// lock is taken through the real one.
	FS wal.FS
}

// Verify checks a queue directory without changing anything. It runs the
// checks Open runs, on every byte: the newest snapshot's checksum; every
// log entry's framing, checksum and LSN; segments that follow on from each
// other; a log that reaches at least the snapshot's LSN and reaches back
// to every record the snapshot's messages need; and that every record
// after the snapshot replays; and that the record of every indexed message
// and sorted value (pending, dead or leased) is its own, as a delivery
// checks. A torn log tail, which Open cuts by itself (a roll a crash tore
// included), is reported in Check.Log.Torn with a nil error; anything else returns an
// error wrapping ErrCorrupt, which Open would return too (for a
// truncation marker from a later moment than the snapshot, Check.Front,
// Open's own error, which says to move the marker out). It takes the
// directory lock shared, so it fails with ErrLocked while a queue has it
// open. A failure to release that lock at the end is joined with whatever
// it returns.
func Verify(dir string, opts *VerifyOptions) (Check, error) {
	return verify(dir, opts, unlockDir)
}

// verify is Verify, releasing the directory's lock with release
// (unlockDir; a white-box test's seam where it fails).
func verify(dir string, opts *VerifyOptions, release func(*dirLock) error) (_ Check, err error) {
	var o VerifyOptions
	if opts != nil {
		o = *opts
	}
	if o.SegmentSize != 0 && o.SegmentSize < 4096 {
		return Check{}, fmt.Errorf("%w: SegmentSize %d below 4096", ErrInvalidOptions, o.SegmentSize)
	}
	lock, err := lockShared(dir) // creates no lock file
	if err != nil {
		return Check{}, err
	}
	defer func() { err = errors.Join(err, release(lock)) }() // a lock still held keeps a writer out
	return examine(o.FS, dir, o.SegmentSize)
}

// examine is Verify without the lock, which the caller holds, reading
// through fsys (nil: the real file system); segSize is the writer's
// SegmentSize, 0 when unknown.
func examine(fsys wal.FS, dir string, segSize int64) (Check, error) {
	var c Check
	// 1. The newest snapshot. A damaged one is a problem; the log is still
	//    checked, against the LSN its name says it reflects.
	st, snapLSN, err := loadSnapshot(dir, &Options{FS: fsys})
	reach := snapLSN
	switch {
	case err != nil && !errors.Is(err, ErrCorrupt):
		return c, err
	case err != nil:
		c.Problems = append(c.Problems, problem(err))
		st, reach = newState(&Options{}), lostSnapshotLSN(fsys, dir)
	case snapLSN != 0:
		info, _, _ := recovery.LatestFS(fsys, dir)
		c.Snapshot = &info
	}
	//    A truncation marker that would remove what that snapshot needs
	//    is refused as Open refuses it: moved out, every segment is kept,
	//    where finishing the truncation would lose them. Beside a damaged
	//    snapshot, it is compared with what the repair's salvage falls
	//    back to: the newest valid older snapshot, or the log alone.
	switch ferr := examineFront(fsys, dir, segSize, st, snapLSN, err != nil, reach); {
	case ferr != nil && !errors.Is(ferr, ErrLaterFront): // the older snapshot could not be read
		return c, ferr
	case ferr != nil:
		c.Front = ferr.Error()
	}
	// 2. The log, entry by entry; it must reach the snapshot.
	log, err := openLogReadOnly(fsys, dir, reach, segSize)
	if errors.Is(err, wal.ErrForeign) { // no repair changes it: Open's advice, not a repair's
		c.Foreign = append(c.Foreign, err.Error())
		return c, c.err()
	}
	if errors.Is(err, ErrCorrupt) { // a log Open refuses before any entry check
		c.Problems = append(c.Problems, problem(err))
		c.sizeUnknown = errors.Is(err, wal.ErrSegmentSizeUnknown)
		return c, c.err()
	}
	if err != nil {
		return c, err
	}
	defer log.Close()
	c.Log, err = log.Verify()
	if err != nil && !errors.Is(err, wal.ErrCorrupt) {
		return c, err
	}
	// 3. It must reach back to what the snapshot's messages need (which a
	//    marker from a later moment says it does not: Front says why).
	if _, err := recovery.Coverage(log, st, snapLSN); err != nil && c.Front == "" {
		c.Problems = append(c.Problems, problem(wrapCorrupt("open", err)))
	}
	// 4. Every record after the snapshot replays, if nothing above failed
	//    (replay over damage only repeats it).
	if c.Damaged() == 0 {
		c.Records, err = replayInto(log, st, snapLSN+1)
		if err != nil {
			c.Problems = append(c.Problems, problem(err))
		}
	}
	// 5. Every indexed message's record is its own, as a delivery checks.
	if c.Damaged() == 0 {
		c.Problems = append(c.Problems, misplacedProblems(st, log)...)
	}
	return c, c.err()
}

// examineFront returns laterFront's error for dir's log, compared with st,
// loaded from the snapshot at snapLSN; when the newest snapshot, at
// lostLSN, is damaged, with what a salvage falls back to instead
// (recovery.LoadOlder): the newest valid older snapshot, or the empty
// state from which the log alone is replayed. When a marker would remove
// a segment and that older snapshot cannot be read (an I/O error, not
// damage), it returns the read error, which wraps no ErrLaterFront: the
// marker cannot be compared, and a repair would fail on the same read
// after its backup (salvageFront).
func examineFront(fsys wal.FS, dir string, segSize int64, st *state, snapLSN uint64, damaged bool, lostLSN uint64) error {
	logPath := filepath.Join(dir, logDir)
	if _, removes := frontMarker(fsys, logPath); !removes {
		return nil
	}
	from := loadedFrom{lsn: snapLSN}
	if damaged {
		older, lsn, err := recovery.LoadOlder(fsys, dir, decoder{&Options{FS: fsys}}, recovery.Info{LSN: lostLSN})
		if err != nil {
			return fmt.Errorf("queue: load the snapshot a salvage falls back to: %w", err)
		}
		st, from = older.(*state), loadedFrom{lsn: lsn, fallback: true}
	}
	return laterFront(fsys, logPath, segSize, st, from.lsn+1, from)
}

// frontBeside returns, for err, an open's refusal of dir's damaged newest
// snapshot (recovery.ErrCorrupt), the marker's error when the log
// directory holds a truncation marker from a later moment than what
// Repair's salvage falls back to (examineFront), as Verify and Repair
// name it first: moving it out comes before the repair, which refuses it.
// When that check cannot read the older snapshot, err with the read error
// (both wrapped: the damage stays the Open's error); err otherwise.
func frontBeside(fsys wal.FS, dir string, segSize int64, err error) error {
	if !errors.Is(err, recovery.ErrCorrupt) {
		return err
	}
	switch ferr := examineFront(fsys, dir, segSize, nil, 0, true, lostSnapshotLSN(fsys, dir)); {
	case ferr != nil && !errors.Is(ferr, ErrLaterFront): // the damage stays the Open's error
		return fmt.Errorf("%w; the log's truncation marker could not be checked against what a repair falls back to: %w", err, ferr)
	case ferr != nil:
		return ferr
	}
	return err
}

// misplacedProblems returns what findMisplaced finds in st over log, each
// as a problem saying that a salvage drops the message.
func misplacedProblems(st *state, log *wal.Log) []string {
	ms, err := findMisplaced(st, log.Read, false)
	if err != nil {
		return []string{problem(err)}
	}
	var out []string
	for _, m := range ms {
		out = append(out, problem(fmt.Errorf("%w (a salvage drops message %d, id %q)", m.err, m.lost.Seq, m.lost.ID)))
	}
	return out
}

// err returns the error Verify returns for c: nil when clean or only torn.
func (c Check) err() error {
	switch {
	case len(c.Foreign) > 0: // it names its way out
		return ownWayOut{fmt.Sprintf("%v: %s", ErrCorrupt, trimCorrupt(c.Foreign[0])), wal.ErrForeign}
	case c.Front != "": // it names its way out, which a repair is not
		return ownWayOut{c.Front, ErrLaterFront}
	case len(c.Log.Salvaged) == 1:
		return withWayOut(fmt.Errorf("%w: a damaged log region: %s", ErrCorrupt, c.Log.Salvaged[0]))
	case len(c.Log.Salvaged) > 1:
		return withWayOut(fmt.Errorf("%w: %d damaged log regions, the first: %s", ErrCorrupt, len(c.Log.Salvaged), c.Log.Salvaged[0]))
	case c.SizeUnknown(): // it names its way out
		return ownWayOut{fmt.Sprintf("%v: %s", ErrCorrupt, trimCorrupt(c.Problems[0])), wal.ErrSegmentSizeUnknown}
	case len(c.Problems) > 0:
		return withWayOut(fmt.Errorf("%w: %s", ErrCorrupt, trimCorrupt(c.Problems[0])))
	}
	return nil
}

// SizeUnknown reports whether the only problem found is one that the
// writer's segment size settles (wal.ErrSegmentSizeUnknown): a roll torn
// on an entry boundary or missing segments. Verify is given no segment
// size; the application's Open, given its SegmentSize, cuts a torn roll
// by itself, and so does Repair given the application's Options. Verify
// given VerifyOptions.SegmentSize tells the two apart.
func (c Check) SizeUnknown() bool {
	return c.sizeUnknown && len(c.Problems) == 1 && c.Damaged() == len(c.Problems)
}

// ownWayOut is Verify's error for a problem whose text names its own way
// out (no repair changes it, or only the writer's segment size settles
// it, or moving a truncation marker out keeps what a repair would lose):
// the Check's text, matching ErrCorrupt and kind (wal.ErrForeign,
// wal.ErrSegmentSizeUnknown, or nil: none) as Open's error does, so that
// callers (and Repair's, which wraps it) can tell it from damage a repair
// fixes.
type ownWayOut struct {
	msg  string
	kind error
}

func (e ownWayOut) Error() string { return e.msg }

func (e ownWayOut) Unwrap() []error {
	if e.kind == nil {
		return []error{ErrCorrupt}
	}
	return []error{ErrCorrupt, e.kind}
}

// problem is the text of err for Check.Problems, without the way out
// (Verify's error names it once).
func problem(err error) string { return withoutWayOut(err) }

// trimCorrupt drops a leading "queue: corrupt: " from a problem's text.
func trimCorrupt(s string) string {
	const p = "queue: corrupt: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// replayInto applies every record of log from from on to st.
func replayInto(log *wal.Log, st *state, from uint64) (int, error) {
	n, err := recovery.Replay(log, from, st.Apply)
	if err != nil {
		return n, wrapCorrupt("replay", err)
	}
	return n, nil
}

// lostSnapshotLSN returns the LSN the newest snapshot's name says it
// reflects, or 0.
func lostSnapshotLSN(fsys wal.FS, dir string) uint64 {
	infos, err := recovery.ListFS(fsys, dir)
	if err != nil || len(infos) == 0 {
		return 0
	}
	return infos[len(infos)-1].LSN
}

// openLogReadOnly opens the queue log in dir without changing anything.
// It opens it first as Open does: a torn tail, or a roll a crash tore,
// is then found as Open finds it, repairable (the log's Verify reports it
// in Torn). Only a log that open refuses is opened again with Salvage,
// which skips damage so that Verify can list all of it (and would take
// the torn end of a roll for damage, since its bytes cannot tell a tear
// from bit rot). segSize is the writer's SegmentSize, 0 when unknown.
func openLogReadOnly(fsys wal.FS, dir string, reach uint64, segSize int64) (*wal.Log, error) {
	path := filepath.Join(dir, logDir)
	log, err := wal.Open(path, &wal.Options{FS: fsys, ReadOnly: true, MustReach: reach, SegmentSize: segSize})
	if errors.Is(err, wal.ErrCorrupt) {
		log, err = wal.Open(path, &wal.Options{FS: fsys, ReadOnly: true, Salvage: true, MustReach: reach, SegmentSize: segSize})
	}
	if err != nil {
		return nil, wrapCorrupt("open log", err)
	}
	return log, nil
}
