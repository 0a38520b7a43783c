package recovery

import (
	"errors"
	"fmt"

	"github.com/walq/walq/wal"
)

// The salvage steps of Recover: what a salvaging open does where a plain
// one refuses. The log's own salvage (damaged entries skipped, a torn
// tail cut) is wal's (wal/repair.go); this is the snapshot's and the
// queue state's.

// loadState is step 1 of Recover: the state of the newest snapshot, whose
// LSN it notes in rep. A salvage sets a damaged snapshot aside
// (rep.SnapshotLost) and starts from an empty state, which fallBack
// replaces by an older snapshot's once the log is open.
func loadState(fsys wal.FS, dir string, d Decoder, salvage bool, rep *Report) (State, error) {
	if !salvage {
		st, lsn, err := Load(fsys, dir, d)
		rep.SnapshotLSN = lsn
		return st, err
	}
	st, lsn, lost, err := LoadSalvaging(fsys, dir, d)
	rep.SnapshotLSN, rep.SnapshotLost = lsn, lost
	return st, err
}

// fallBack is the end of step 2 for a salvage that set the newest
// snapshot aside: the state becomes the newest valid older snapshot's
// (LoadOlder), or stays st (empty) when there is none.
func fallBack(fsys wal.FS, dir string, d Decoder, st State, rep *Report) (State, error) {
	if rep.SnapshotLost.Path == "" {
		return st, nil
	}
	older, lsn, err := LoadOlder(fsys, dir, d, rep.SnapshotLost)
	if err != nil {
		return nil, err
	}
	rep.SnapshotLSN = lsn
	return older, nil
}

// LoadSalvaging is Load as a salvage runs it (step 1 of Recover): a newest
// snapshot that fails its checks (ErrCorrupt) is set aside, not refused.
// It then returns d's empty state, LSN 0 and the Info of the snapshot set
// aside (Report.SnapshotLost); the log must still reach that snapshot's
// LSN. Once the log is open, LoadOlder replaces the empty state by the
// newest valid older snapshot's, if any. A read-only preview of
// the salvage loads its state with both too.
func LoadSalvaging(fsys wal.FS, dir string, d Decoder) (State, uint64, Info, error) {
	st, lsn, err := Load(fsys, dir, d)
	if err == nil || !errors.Is(err, ErrCorrupt) {
		return st, lsn, Info{}, err
	}
	infos, lerr := ListFS(fsys, dir)
	if lerr != nil || len(infos) == 0 {
		return nil, 0, Info{}, err
	}
	return d.NewState(), 0, infos[len(infos)-1], nil
}

// LoadOlder returns, for a salvage that set the snapshot lost aside, the
// state and LSN of the newest snapshot older than lost that passes Load's
// checks. Replaying the log over it restores what lost held, acked
// producer ids included. A log that no longer continues it (its front
// segments lost) does not make it less true: what it holds of acked ids,
// deliveries and dead letters stands, and Recover handles the lost front
// as it does after any snapshot (Coverage, Report.LostBefore), reporting
// the messages whose records went with it rather than delivering them.
// Damaged older snapshots are passed over. Without one it returns d's
// empty state and 0, from which replay rebuilds what the log still holds.
// Only an error reading the directory or a file is returned.
func LoadOlder(fsys wal.FS, dir string, d Decoder, lost Info) (State, uint64, error) {
	infos, err := ListFS(fsys, dir)
	if err != nil {
		return nil, 0, err
	}
	for i := len(infos) - 1; i >= 0; i-- {
		info := infos[i]
		if info.LSN >= lost.LSN {
			continue
		}
		st, err := loadInfo(fsys, info, d)
		if err == nil {
			return st, info.LSN, nil
		}
		if !errors.Is(err, ErrCorrupt) {
			return nil, 0, err
		}
	}
	return d.NewState(), 0, nil
}

// damaged reports whether a salvage found anything lost: damaged log
// entries, a log that ends before the snapshot or starts after what it
// needs, or a damaged snapshot.
func (r *Report) damaged() bool {
	return len(r.Log.Salvaged) > 0 || r.LostBefore != 0 || r.SnapshotLost.Path != ""
}

// rewritePastDamage is step 6 of Recover: the live messages in the
// segments up to the last damaged one are copied past it (or forgotten
// when their records were lost), and those segments are cut off.
func rewritePastDamage(t Target, log *wal.Log, rep *Report) error {
	target := max(pastDamage(log, rep.Log), rep.LostBefore)
	if target == 0 {
		return nil
	}
	n, err := t.CopyPast(target)
	rep.Rewritten = n
	if err != nil {
		return fmt.Errorf("recovery: rewrite past damaged log: %w", err)
	}
	return nil
}

// pastDamage returns the LSN past the salvaged damage rep of log: the
// first LSN of the segment after the last one with damage, and at least
// the LSN after the last record lost (a log that ended before its snapshot
// resumes there); 0 when nothing was damaged.
func pastDamage(log *wal.Log, rep wal.Report) uint64 {
	damaged := map[string]bool{}
	var target uint64
	for _, d := range rep.Salvaged {
		damaged[d.Segment] = true
		if d.LastLSN != 0 {
			target = max(target, min(d.LastLSN+1, log.LastLSN()+1))
		}
	}
	segs := log.Segments()
	for i := 0; i+1 < len(segs); i++ {
		if !damaged[segs[i].Path] {
			continue
		}
		next := segs[i+1].FirstLSN
		if next == 0 { // the empty tail a loss at the end resumes in
			next = log.LastLSN() + 1
		}
		target = max(target, next)
	}
	return target
}
