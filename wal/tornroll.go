package wal

import (
	"fmt"
	"path/filepath"
)

// A power loss during a segment roll can leave the sealed segment torn
// and the next segment present but empty: tidwall/wal writes the batch,
// seals the segment and creates the next file, and only then does walq
// fsync the sealed segment and the directory (syncRolled). The new file's
// name can reach the disk before the sealed segment's last bytes do.
// Nothing past the tear was acknowledged: every record at or after it
// waits for syncRolled, which fsyncs the sealed segment whole. Since no
// valid entry follows the damage anywhere, the tear is a torn tail that
// happens to lie one segment back, and Open repairs it as one: the empty
// segment after it is removed, then the torn segment is cut.
//
// Only the last sealed segment is considered, only when it is torn (no
// valid entry follows the damage in it) or ends at an entry boundary short
// of the index the tail is named by while shorter than SegmentSize (a
// segment that reached it was sealed whole: the tail then names a missing
// segment's end), and only when the tail holds nothing but zeros. A
// SegmentSize raised between runs could make a whole segment look short;
// lowered, it can only make a torn roll look whole, which is refused. A tail with valid entries after a damaged sealed segment is
// what mid-log damage looks like (a bit flip in a sealed segment's last
// entry), and stays ErrCorrupt, as damage followed by a valid entry always
// is. (tidwall/wal itself fsyncs the sealed file before creating the next,
// which rules these states out on a real disk; walq does not count on that
// fsync: tidwall.go.)
//
// A read-only Open finds a torn roll as a writable one does, and reports
// it, removing and cutting nothing. A salvaging Open repairs a torn roll
// as a plain Open does, except for a damaged end whose entries, bounded as
// a salvage bounds them (repair.go), reach the tail's name: that one the
// salvage reports lost, and the log resumes past the most its bytes can
// hold, since a damaged entry there may have been synced (bit rot) while
// a torn one was not, and the bytes cannot tell which. (A writer's roll
// seen by a read-only Open beside it is never torn: tidwall/wal writes the
// sealed segment's last entry before it creates the next file.)

// tornRoll checks for a torn roll after the tail was repaired and, when it
// finds one, makes the torn segment the tail and plans the removal of the
// segment after it (made by repair, before the cut).
func (l *Log) tornRoll() error {
	n := len(l.seg.list)
	if n < 2 {
		return nil
	}
	s, tail := l.seg.list[n-2], l.seg.list[n-1]
	if ours, err := l.emptyTail(tail); err != nil || !ours {
		return err
	}
	if s.size == 0 { // tidwall/wal never seals an empty segment: every byte was lost
		return l.dropTornTail(s, tail)
	}
	r := &segReader{f: s.file.f}
	res, err := scanSegment(r, scanSpec{seg: s, limit: s.size})
	if err != nil {
		return err
	}
	whole := s.firstIndex + uint64(res.entries) // the index after s's whole entries
	switch {
	case tail.firstIndex < whole:
		return nil // not walq's next segment: the checks report it
	case res.bad == nil && tail.firstIndex == whole:
		return nil // whole, tail where it belongs: a gap, if any, is checkSealedEnds's to report
	case res.bad == nil && s.size >= l.opts.SegmentSize:
		// Clean and full: tidwall/wal seals a segment at the entry that
		// takes it to SegmentSize, so a roll torn at an entry boundary
		// leaves it shorter. The tail is named past a segment that is
		// missing, which the checks report.
		return nil
	case res.bad != nil:
		_, _, found, err := findValid(r, res.bad.off+1, s.size, res.endLSN)
		if err != nil || found {
			return err // damage followed by a valid entry: not torn
		}
		if l.opts.Salvage {
			if explained, err := damageReachesTail(r, s, tail, res); err != nil || explained {
				return err // the salvage's (see above)
			}
		}
	}
	// Torn, or cut cleanly at an entry boundary before the entries the
	// roll wrote (the tail is named past them).
	return l.dropTornTail(s, tail)
}

// damageReachesTail reports whether the damaged end of s, from res.bad to
// the end of the file (no valid entry follows), can have held the entries
// the tail's name counts past the whole ones: its entries bounded as a
// salvage bounds them (boundEntries).
func damageReachesTail(r *segReader, s, tail *segment, res scanResult) (bool, error) {
	sp := scanSpec{seg: s, limit: s.size}
	d, lone, err := skipDamage(r, sp, res.bad.off, 0, false, res.endLSN, entryHeader{}, res.bad.reason)
	if err != nil {
		return false, err
	}
	held := boundEntries([]Damage{d}, []bool{lone})
	whole := s.firstIndex + uint64(res.entries)
	return tail.firstIndex >= whole+uint64(held.lo) && tail.firstIndex <= whole+uint64(held.hi), nil
}

// emptyTail reports whether tail holds no entry and nothing but zeros:
// the file a roll created, which lost whatever was written to it.
func (l *Log) emptyTail(tail *segment) (bool, error) {
	if tail.entries > 0 {
		return false, nil
	}
	fi, err := tail.file.f.Stat()
	if err != nil {
		return false, fmt.Errorf("wal: stat %s: %w", tail.path, err)
	}
	return zeroFilled(&segReader{f: tail.file.f}, 0, fi.Size())
}

// dropTornTail makes s, torn, the tail in place of tail.
func (l *Log) dropTornTail(s, tail *segment) error {
	l.seg.list = l.seg.list[:len(l.seg.list)-1]
	tail.drop()
	s.sealed = false
	l.cut, l.report.Torn = nil, nil
	if err := l.repairTail(s); err != nil {
		return err
	}
	l.dropTail = tail.path
	if l.report.Torn == nil {
		l.report.Torn = &Damage{Segment: s.path, Reason: "torn write: the segment is empty"}
	}
	t := l.report.Torn
	t.Reason += fmt.Sprintf("; the crash came during a segment roll: the segment after it, %s, created by the same roll and holding nothing, is removed",
		filepath.Base(tail.path))
	return nil
}

// removeTornTail removes the segment dropTornTail planned to remove and
// fsyncs the directory, before the torn segment is cut: a crash between
// the two then leaves a torn last segment, which the next Open cuts.
func (l *Log) removeTornTail() error {
	if l.dropTail == "" {
		return nil
	}
	if err := l.opts.FS.Remove(l.dropTail); err != nil {
		return fmt.Errorf("wal: repair a torn roll: %w", err)
	}
	return SyncDirFS(l.opts.FS, l.dir)
}
