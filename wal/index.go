package wal

import (
	"fmt"
	"sort"
)

// This file finds records: which segment holds an LSN, and where in it.
// The tail is indexed by the repair at Open and as entries are written;
// sealed segments are indexed lazily, on the first lookup that needs them,
// by a scan that verifies every entry (or eagerly at Open under Salvage,
// see repair.go). A lookup of a segment's first LSN needs no index.

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
func (l *Log) ensureIndexed(s *segment) error { return l.buildIndex(s, true) }

// buildIndex is ensureIndexed, checking the continuity with the next
// segment only when successor is set: checkTailName, which checks the name
// of an empty tail after s itself and says what a wrong one means, indexes
// s without it.
func (l *Log) buildIndex(s *segment, successor bool) error {
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
	if successor {
		if err := l.checkSuccessor(s, res); err != nil {
			return err
		}
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
