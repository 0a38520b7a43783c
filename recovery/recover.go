package recovery

import (
	"errors"
	"fmt"

	"github.com/walq/walq/wal"
)

// State is what recovery rebuilds: the result of a snapshot and of every
// log record applied after it. Its owner defines it (walq's queue keeps
// its indexes, cursor and counters in it); recovery only applies records
// to it and asks what it needs. Recover calls it from one goroutine.
type State interface {
	// Apply applies the record rec, read at lsn. A record that does not
	// apply (damage) returns an error and changes nothing. rec is valid
	// only during the call: the log's reader reuses it.
	Apply(lsn uint64, rec []byte) error
	// Skip notes that a salvaging replay passed over the record at lsn
	// without applying it, so that the next snapshot covers it.
	Skip(lsn uint64)
	// Last returns the LSN of the last record the state reflects.
	Last() uint64
	// Need returns the lowest LSN the state needs the log to hold: the
	// oldest record of a message it holds, or where its cursor reads on.
	Need() uint64
	// Clean reports whether the last record applied was a clean close.
	Clean() bool
}

// Decoder makes a State from a snapshot body, or an empty one.
type Decoder interface {
	// NewState returns the state of a directory that has no snapshot.
	NewState() State
	// DecodeState returns the state a snapshot body holds.
	DecodeState(body []byte) (State, error)
}

// Target is the owner's side of Recover: the states, the log, and what
// happens to them once replayed.
type Target interface {
	Decoder
	// OpenLog opens the log and cuts its torn tail. A new log starts at
	// LSN start; the log must reach at least LSN reach
	// (wal.Options.StartLSN and MustReach).
	OpenLog(start, reach uint64) (*wal.Log, error)
	// Install makes st, replayed, the live state over the log; snapLSN is
	// the LSN of the snapshot it was loaded from (0: none).
	Install(st State, snapLSN uint64)
	// EndLeases ends every lease of the live state: the consumers that
	// held them died with the process before. It returns how many it
	// ended and how many of those went to the dead-letter set.
	EndLeases() (ended, dead int, err error)
	// CopyPast copies every live message whose record lies before lsn
	// past it, forgets those whose record was lost, and takes a snapshot
	// that lets the log before lsn go. It also writes what a salvaging
	// replay noted of messages whose first lease was lost (passed by the
	// cursor, or settled by a surviving record). It returns how many it
	// copied or forgot.
	CopyPast(lsn uint64) (int, error)
}

// Report says what Recover found and did.
type Report struct {
	SnapshotLSN  uint64     // LSN of the snapshot loaded; 0 when none
	SnapshotLost Info       // salvage: the damaged newest snapshot set aside (SnapshotLSN: the older one used); zero when none
	Log          wal.Report // the torn tail cut, the damage salvaged
	LostBefore   uint64     // salvage: the log starts here, after records the snapshot needed; 0 when none
	Replayed     int        // records replayed after the snapshot
	Skipped      int        // salvage: of those, records that no longer applied because others were lost
	Clean        bool       // the last record replayed was a clean close
	Requeued     int        // leases a crashed process left, ended
	DeadOnOpen   int        // of those, messages that went to the dead-letter set
	Rewritten    int        // salvage: messages copied past the damage or forgotten
}

// Recover runs the recovery procedure (see the package documentation) on
// the directory dir for t, and returns the log it opened and what it
// found. With salvage, damage is dropped and reported instead of
// refused. Snapshots are read through fsys (nil: the operating system's
// file system). On an error the log, if opened, is closed.
func Recover(fsys wal.FS, dir string, t Target, salvage bool) (*wal.Log, Report, error) {
	var rep Report
	// 1. The newest snapshot, if any.
	st, err := loadState(fsys, dir, t, salvage, &rep)
	if err != nil {
		return nil, rep, err
	}
	// 2. The log, its torn tail cut. It must reach the snapshot's LSN (or
	//    a damaged snapshot's: no LSN it reflects is ever given again).
	//    A salvage that set the snapshot aside falls back to the newest
	//    valid older one.
	log, err := t.OpenLog(rep.SnapshotLSN+1, max(rep.SnapshotLSN, rep.SnapshotLost.LSN))
	if err != nil {
		return nil, rep, err
	}
	if st, err = fallBack(fsys, dir, t, st, &rep); err != nil {
		log.Close()
		return nil, rep, err
	}
	if err := replayLog(log, st, salvage, &rep); err != nil {
		log.Close()
		return nil, rep, err
	}
	if err := finish(t, log, st, &rep); err != nil {
		log.Close()
		return nil, rep, err
	}
	return log, rep, nil
}

// replayLog runs steps 3 and 4: the log must hold what the state needs,
// then every record after the snapshot is applied to st.
func replayLog(log *wal.Log, st State, salvage bool, rep *Report) error {
	// 3. The log reaches back to the snapshot and to the oldest record its
	//    messages need (where the truncation after it stopped): a lost
	//    front segment must not open as a queue whose messages fail at
	//    delivery. A salvage notes the loss and starts where the log does.
	from, err := Coverage(log, st, rep.SnapshotLSN)
	if err != nil && salvage && errors.Is(err, ErrLogMissing) {
		rep.LostBefore = log.FirstLSN()
		from, err = max(rep.SnapshotLSN+1, rep.LostBefore), nil
	}
	if err != nil {
		return err
	}
	// 4. Every record after the snapshot. A salvage skips the records that
	//    no longer apply because others were lost.
	rep.Replayed, rep.Skipped, err = replay(log, from, st, salvage)
	rep.Clean, rep.Log = st.Clean(), log.Report()
	return err
}

// finish runs steps 5 and 6 on the replayed state st: it becomes the live
// one, the leases of a crashed process end, and a salvage rewrites what
// lives in damaged segments.
func finish(t Target, log *wal.Log, st State, rep *Report) error {
	t.Install(st, rep.SnapshotLSN)
	// 5. A crashed process's consumers died with it: their leases end now.
	//    After a salvage too: a lease may name a message whose record is
	//    lost.
	if !rep.Clean || rep.damaged() {
		n, dead, err := t.EndLeases()
		rep.Requeued, rep.DeadOnOpen = n, dead
		if err != nil {
			return err
		}
	}
	// 6. After a salvage, copy what lives in damaged segments forward and
	//    cut them off, so that the damage is gone from disk.
	return rewritePastDamage(t, log, rep)
}

// replay applies every record of log from from on to st and returns how
// many it replayed and, of those, how many a salvage skipped.
func replay(log *wal.Log, from uint64, st State, salvage bool) (int, int, error) {
	skipped := 0
	n, err := Replay(log, from, func(lsn uint64, b []byte) error {
		err := st.Apply(lsn, b)
		if err != nil && salvage {
			skipped++
			st.Skip(lsn)
			return nil
		}
		return err
	})
	return n, skipped, err
}

// Load returns the state of the newest snapshot in dir and its LSN, or
// d's empty state and 0 when there is none. A snapshot that fails its
// checks, whose body does not decode, or whose body is not the state as
// of the LSN it is named for, is ErrCorrupt. It reads through fsys (nil:
// the operating system's file system).
func Load(fsys wal.FS, dir string, d Decoder) (State, uint64, error) {
	info, body, err := LatestFS(fsys, dir)
	if errors.Is(err, ErrNoSnapshot) {
		return d.NewState(), 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	st, err := decodeInfo(info, body, d)
	if err != nil {
		return nil, 0, err
	}
	return st, info.LSN, nil
}

// loadInfo reads the snapshot info and returns its state, checked as Load
// checks the newest.
func loadInfo(fsys wal.FS, info Info, d Decoder) (State, error) {
	body, err := readInfo(fsys, info)
	if err != nil {
		return nil, err
	}
	return decodeInfo(info, body, d)
}

// decodeInfo returns the state that body, read from the snapshot info,
// holds: ErrCorrupt when it does not decode or is not the state as of the
// LSN info is named for.
func decodeInfo(info Info, body []byte, d Decoder) (State, error) {
	st, err := d.DecodeState(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, info.Path, err)
	}
	if st.Last() != info.LSN {
		return nil, fmt.Errorf("%w: %s reflects LSN %d", ErrCorrupt, info.Path, st.Last())
	}
	return st, nil
}

// Coverage checks that log holds what st, loaded from the snapshot at
// snapLSN, needs: every record after the snapshot, and the records of its
// messages. It returns the LSN replay starts at, or an error wrapping
// ErrLogMissing.
func Coverage(log *wal.Log, st State, snapLSN uint64) (uint64, error) {
	first := log.FirstLSN()
	need := min(st.Need(), snapLSN+1)
	if first <= need {
		return snapLSN + 1, nil
	}
	where := "the log holds no segment"
	if segs := log.Segments(); len(segs) > 0 {
		where = segs[0].Path
	}
	if first > snapLSN+1 {
		what := fmt.Sprintf("snapshot LSN %d", snapLSN)
		if snapLSN == 0 {
			what = "LSN 1 (there is no snapshot: was it deleted?)"
		}
		return 0, fmt.Errorf("%w: log starts at LSN %d (%s), after %s", ErrLogMissing, first, where, what)
	}
	return 0, fmt.Errorf("%w: log starts at LSN %d (%s), but the snapshot's messages need LSN %d: a segment is missing",
		ErrLogMissing, first, where, need)
}
