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
// (rep.SnapshotLost) and starts from an empty state: replay rebuilds what
// the log still holds.
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

// LoadSalvaging is Load as a salvage runs it (step 1 of Recover): a newest
// snapshot that fails its checks (ErrCorrupt) is set aside, not refused.
// It then returns d's empty state, LSN 0 and the Info of the snapshot set
// aside (Report.SnapshotLost), from which replay rebuilds what the log
// still holds; the log must still reach that snapshot's LSN. A read-only
// preview of the salvage loads its state with it too.
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
