package wal

import (
	"fmt"
	"sort"
)

// This file finds records: which segment holds an LSN, and where in it.
// The tail is indexed by the repair at Open and as entries are written;
// sealed segments are indexed lazily, on the first lookup that needs them,
// by a scan that verifies every entry (or eagerly at Open under Salvage).
// A lookup of a segment's first LSN needs no index.

// locate pins the segment holding lsn and returns its file and the index
// point at or before lsn. The caller releases the file.
func (l *Log) locate(lsn LSN) (*segment, *segFile, point, error) {
	s, err := l.segmentFor(lsn)
	if err != nil {
		return nil, nil, point{}, err
	}
	l.seg.RLock()
	first := s.firstLSN == lsn
	l.seg.RUnlock()
	if !first {
		if err := l.ensureIndexed(s); err != nil {
			return nil, nil, point{}, err
		}
	}
	l.seg.RLock()
	defer l.seg.RUnlock()
	file := s.pin()
	if file == nil {
		return nil, nil, point{}, l.goneErr(lsn)
	}
	return s, file, s.pointFor(lsn), nil
}

// segmentFor returns the last segment that starts at or below lsn.
func (l *Log) segmentFor(lsn LSN) (*segment, error) {
	l.seg.RLock()
	defer l.seg.RUnlock()
	list := l.seg.list
	i := sort.Search(len(list), func(i int) bool { return list[i].firstLSN > lsn }) - 1
	if i < 0 || lsn < l.firstLSN.Load() {
		return nil, l.goneErr(lsn)
	}
	return list[i], nil
}

// goneErr explains why lsn has no segment.
func (l *Log) goneErr(lsn LSN) error {
	if l.closed.Load() {
		return ErrClosed
	}
	return fmt.Errorf("%w: LSN %d is below the first LSN %d (truncated)", ErrNotFound, lsn, l.FirstLSN())
}

// ensureIndexed builds the sparse index of a sealed segment read from disk,
// verifying every entry and the continuity with the next segment.
func (l *Log) ensureIndexed(s *segment) error {
	l.seg.RLock()
	done := s.indexed
	l.seg.RUnlock()
	if done {
		return nil
	}
	s.buildMu.Lock()
	defer s.buildMu.Unlock()
	l.seg.RLock()
	done, file, size, first := s.indexed, s.pin(), s.size, s.firstLSN
	l.seg.RUnlock()
	if file == nil {
		return l.goneErr(first)
	}
	defer file.release()
	if done {
		return nil
	}
	res, err := scanSegment(&segReader{f: file.f}, scanSpec{seg: s, limit: size, want: first})
	if err != nil {
		return err
	}
	if res.bad != nil {
		return corruptAt(s.loc(res.bad.off, res.bad.ord), res.bad.reason)
	}
	if err := l.checkSuccessor(s, res); err != nil {
		return err
	}
	l.seg.Lock()
	s.points, s.entries, s.endLSN, s.indexed = res.points, res.entries, res.endLSN, true
	l.seg.Unlock()
	return nil
}

// checkSuccessor checks that the segment after s starts at the entry index
// and the LSN right after s's last entry.
func (l *Log) checkSuccessor(s *segment, res scanResult) error {
	l.seg.RLock()
	defer l.seg.RUnlock()
	next, listed := l.successorLocked(s)
	if next == nil || !listed {
		return nil
	}
	if want := next.firstIndex - s.firstIndex; uint64(res.entries) != want {
		return corruptAt(s.loc(s.size, res.entries), fmt.Sprintf(
			"segment holds %d entries but the next segment %s starts %d entries after it", res.entries, next.path, want))
	}
	if next.size > 0 && next.firstLSN != res.endLSN {
		return corruptAt(next.loc(0, 0), fmt.Sprintf("%s: segment starts at LSN %d, the previous one ends before LSN %d",
			errLSNOutOfLine, next.firstLSN, res.endLSN))
	}
	return nil
}

// successorLocked returns the first listed segment after s, or nil, and
// whether s itself is still listed (not truncated away); the caller holds
// Log.seg.
func (l *Log) successorLocked(s *segment) (*segment, bool) {
	list := l.seg.list
	i := sort.Search(len(list), func(i int) bool { return list[i].firstIndex >= s.firstIndex })
	listed := i < len(list) && list[i] == s
	if listed {
		i++
	}
	if i < len(list) {
		return list[i], listed
	}
	return nil, listed
}

// salvageSealed scans every sealed segment at Open, skipping damaged
// entries, and reports each skipped region with the LSNs it lost. It runs
// before the committer starts, so it needs no lock.
func (l *Log) salvageSealed(sealed []*segment) error {
	damage := make([][]Damage, len(l.seg.list))
	r := &segReader{}
	for i, s := range sealed {
		r.reset(s.file.f)
		res, err := scanSegment(r, scanSpec{seg: s, limit: s.size, resync: true})
		if err != nil {
			return err
		}
		s.points, s.entries, s.firstLSN, s.endLSN, s.indexed = res.points, res.entries, res.firstLSN, res.endLSN, true
		damage[i] = res.damage
	}
	return l.fillSalvaged(damage)
}

// fillSalvaged completes the LSN ranges of the damage found in each
// segment, reports LSN gaps between segments that no damage explains (a
// missing file), places segments without a valid entry, and appends it all
// to the report.
func (l *Log) fillSalvaged(damage [][]Damage) error {
	list := l.seg.list
	var prevEnd LSN
	for i, s := range list {
		next := firstLSNAfter(list, i)
		if s.entries == 0 {
			s.firstLSN = max(next, prevEnd)
			s.endLSN = s.firstLSN
		}
		start := prevEnd
		if i == 0 {
			start = l.opts.StartLSN // damage before the first valid entry loses from there
		}
		ds := fillLost(damage[i], start, next)
		if i == len(list)-1 && s.entries == 0 && prevEnd != 0 {
			l.fixTailCut(s.path, prevEnd)
		}
		if s.entries > 0 && prevEnd != 0 {
			if s.firstLSN < prevEnd {
				return corruptAt(s.loc(0, 0), fmt.Sprintf("%s: segment starts at LSN %d, below the previous end %d",
					errLSNOutOfLine, s.firstLSN, prevEnd))
			}
			if s.firstLSN > prevEnd && !covers(l.report.Salvaged, ds, s.firstLSN-1) {
				ds = append([]Damage{{Segment: s.path, FirstLSN: prevEnd, LastLSN: s.firstLSN - 1,
					Reason: "LSN gap before this segment (a segment file is missing?)"}}, ds...)
			}
		}
		l.report.Salvaged = append(l.report.Salvaged, ds...)
		if s.entries > 0 {
			prevEnd = s.endLSN
		}
	}
	return nil
}

// fixTailCut completes the report of a salvage cut that removed every
// entry of the tail segment: its first lost LSN is the end of the segment
// before, which the tail's repair (run first) could not know.
func (l *Log) fixTailCut(path string, prevEnd LSN) {
	for i := range l.report.Salvaged {
		d := &l.report.Salvaged[i]
		if d.Segment == path && d.Offset == 0 && (d.FirstLSN == 0 || d.FirstLSN > prevEnd) {
			d.FirstLSN = prevEnd
		}
	}
}

// firstLSNAfter returns the first LSN of the first segment after list[i]
// that holds records, or 0.
func firstLSNAfter(list []*segment, i int) LSN {
	for _, s := range list[i+1:] {
		if s.entries > 0 {
			return s.firstLSN
		}
	}
	return 0
}

// covers reports whether a damage report already accounts for the LSNs
// up to last.
func covers(a, b []Damage, last LSN) bool {
	for _, d := range append(append([]Damage(nil), a...), b...) {
		if d.LastLSN == last {
			return true
		}
	}
	return false
}

// fillLost completes the LSN ranges of the damage found in one segment: a
// region at the start loses the LSNs from the previous segment's end; a
// region at the end loses the LSNs up to the next segment's start.
func fillLost(damage []Damage, prevEnd, nextFirst LSN) []Damage {
	for i := range damage {
		d := &damage[i]
		if d.FirstLSN == 0 && d.Offset == 0 {
			d.FirstLSN = prevEnd
		}
		if d.LastLSN == 0 && i == len(damage)-1 && nextFirst != 0 {
			d.LastLSN = nextFirst - 1
		}
		if d.LastLSN != 0 && d.LastLSN < d.FirstLSN {
			d.FirstLSN, d.LastLSN = 0, 0 // no record lost
		}
	}
	return damage
}
