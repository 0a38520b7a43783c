package wal

import (
	"fmt"
	"path/filepath"
)

// A power loss during a segment roll can leave the sealed segment torn
// and the next segment present: tidwall/wal writes the batch, seals the
// segment and creates the next file, and only then does walq fsync the
// sealed segment and the directory (syncRolled). The new file's name can
// reach the disk before the sealed segment's last bytes do. Nothing past
// the tear was acknowledged: every record at or after it waits for
// syncRolled, which fsyncs the sealed segment whole. So the tear is a torn
// tail that happens to lie one segment back, and Open repairs it as one:
// the segment after it is removed, then the torn segment is cut.
//
// Only the last sealed segment is considered, and only when it is torn
// (no valid entry follows the damage in it) or ends at an entry boundary
// short of the index the tail is named by; the tail must be named past its
// whole entries. Anything else stays ErrCorrupt. (tidwall/wal
// itself fsyncs the sealed file before creating the next, which rules this
// state out on a real disk; walq does not count on that fsync: tidwall.go.)

// tornRoll checks for a torn roll after the tail was repaired and, when it
// finds one, makes the torn segment the tail and plans the removal of the
// segment after it (made by repair, before the cut).
func (l *Log) tornRoll() error {
	n := len(l.seg.list)
	if l.opts.ReadOnly || l.opts.Salvage || n < 2 {
		return nil
	}
	s, tail := l.seg.list[n-2], l.seg.list[n-1]
	if s.size == 0 { // tidwall/wal never seals an empty segment: every byte was lost
		return l.dropTornTail(s, tail)
	}
	if tail.entries > 0 {
		ok, err := endsAt(s.file.f, s.size, tail.firstLSN)
		if err != nil || ok {
			return err
		}
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
	case res.bad != nil:
		_, _, found, err := findValid(r, res.bad.off+1, s.size, res.endLSN)
		if err != nil || found {
			return err // damage followed by a valid entry: not torn
		}
	}
	// Torn, or cut cleanly at an entry boundary before the entries the
	// roll wrote (the tail is named past them). The tail must be one walq
	// wrote: empty, zeros, or entries that carry on from s's LSNs.
	ours, err := l.rolledTail(tail, res.endLSN)
	if err != nil || !ours {
		return err
	}
	return l.dropTornTail(s, tail)
}

// rolledTail reports whether tail looks like the segment a roll after s
// created: no bytes, only zeros, or entries from LSN end (the LSN after
// s's whole entries) on.
func (l *Log) rolledTail(tail *segment, end LSN) (bool, error) {
	if tail.entries > 0 {
		return end != 0 && tail.firstLSN >= end, nil
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
	t.Reason += fmt.Sprintf("; the crash came during a segment roll: the segment after it, %s, written by the same roll and never fsynced, is removed",
		filepath.Base(tail.path))
	if tail.entries > 0 {
		t.LastLSN = max(t.LastLSN, tail.endLSN-1)
	}
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
