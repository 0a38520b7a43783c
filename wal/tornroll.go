package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
)

// A power loss during a segment roll can leave the sealed segment torn
// and the next segment present but empty: tidwall/wal writes the entries
// up to the one that seals the segment, seals it and creates the next
// file, and only then does walq fsync the sealed segment and the
// directory (syncRolled), before it writes anything into the new file
// (committer.writeParts; a tail Open found past the segment size was
// fsynced by Open). The new file's name can reach the disk before the
// sealed segment's last bytes do; its entries cannot.
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
// lowered, it can only make a torn roll look whole, which is refused. A
// salvaging or read-only Open not given SegmentSize (a tool reading a log
// another program wrote) takes no segment for short (endsShort). A tail
// with valid entries after a damaged sealed segment is
// what mid-log damage looks like (a bit flip in a sealed segment's last
// entry), and stays ErrCorrupt, as damage followed by a valid entry always
// is: a power loss cannot leave it, since walq writes into the new segment
// only after fsyncing the sealed one (tidwall/wal's own fsync of the
// sealed file at its roll is not counted on: tidwall.go).
//
// A read-only Open finds a torn roll as a writable one does, and reports
// it, removing and cutting nothing. A salvaging Open repairs a torn roll
// as a plain Open does, keeping the same records, except for a damaged end
// whose entries, bounded as a salvage bounds them (repair.go), reach the
// tail's name: that one the salvage reports lost, and the log resumes past
// the most its bytes can hold, since a damaged entry there may have been
// synced (bit rot) while a torn one was not, and the bytes cannot tell
// which. An end the tail is named past was cut short by the crash, but a
// synced entry at its start may have rotted too: unless it bears the mark
// of a write that never reached the disk (zeros, or one frame the end of
// the file cuts with no whole entry behind it: a synced entry's bit rot
// can make its frame length run past the end, but the entry stays whole
// behind it), the salvage cuts it as a plain Open does and still takes
// the LSNs its bytes can hold as lost, resuming past them; when nothing
// before it in the log bounds its first LSN, it refuses. (A writer's roll
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
	case res.bad == nil && !l.endsShort(s):
		// Clean and full, or of a size nothing tells is short: the tail
		// may be named past a segment that is missing, which the checks
		// report.
		return nil
	case res.bad != nil:
		_, _, found, err := findValid(r, res.bad.off+1, s.size, res.endLSN)
		if err != nil || found {
			return err // damage followed by a valid entry: not torn (the tear rule of repair.go is not applied here: doc.go)
		}
		if l.opts.Salvage {
			if salvaged, err := l.salvagesEnd(r, s, tail, res); err != nil || salvaged {
				return err // the salvage's (see above)
			}
		}
	}
	// Torn, or cut cleanly at an entry boundary before the entries the
	// roll wrote (the tail is named past them).
	return l.dropTornTail(s, tail)
}

// endsShort reports whether s, whole, ends short of the size at which the
// log's writer sealed its segments: tidwall/wal seals a segment at the
// entry that takes it to SegmentSize, so a roll torn at an entry boundary
// leaves it shorter, and a whole sealed segment is not; and no entry is
// written into a segment that reached it (a writable Open rolls a tail of
// exactly SegmentSize itself: rollFullTail), so an empty tail named past a
// whole segment that is not short names a missing segment. A salvaging or
// read-only Open without Options.SegmentSize (a tool reading a log that
// another program wrote) does not know that size: no segment is short to
// it, or a missing segment after it would be taken for a torn roll, and
// the LSNs of the missing segment's entries given out again.
func (l *Log) endsShort(s *segment) bool {
	return !l.sizeUnknown() && s.size < l.opts.SegmentSize
}

// sizeUnknown reports whether the writer's SegmentSize is unknown to this
// open: a salvaging or read-only Open not given Options.SegmentSize.
func (l *Log) sizeUnknown() bool {
	return l.opts.segmentSizeDefault && (l.opts.Salvage || l.opts.ReadOnly)
}

// salvagesEnd reports whether a salvage takes the damaged end of s, from
// res.bad to the end of the file (no valid entry follows), for damage
// rather than a torn roll: when its entries, bounded as a salvage bounds
// them (boundEntries), can reach the tail's name. When the name lies past
// them, the file is shorter than the roll left it, and the end is cut as
// a plain Open cuts it; unless its bytes bear the mark of a write that
// never reached the disk (tornMark), the LSNs they can hold are then taken
// as lost (boundTornEnd): a synced entry that rotted before the crash lost
// the rest looks the same.
func (l *Log) salvagesEnd(r *segReader, s, tail *segment, res scanResult) (bool, error) {
	sp := scanSpec{seg: s, limit: s.size}
	d, lone, err := skipDamage(r, sp, res.bad.off, 0, false, res.endLSN, entryHeader{}, res.bad.reason)
	if err != nil {
		return false, err
	}
	held := boundEntries([]Damage{d}, []bool{lone})
	whole := s.firstIndex + uint64(res.entries)
	if tail.firstIndex > whole+uint64(held.hi) {
		torn, err := tornMark(r, res.bad.off, s.size)
		l.tornEnd = !torn
		return false, err
	}
	if tail.firstIndex < whole+uint64(held.lo) {
		return false, nil
	}
	if d.FirstLSN != 0 {
		return true, nil
	}
	if torn, err := tornMark(r, res.bad.off, s.size); err != nil || !torn {
		return true, err
	}
	return l.boundedBefore(len(l.seg.list) - 2)
}

// boundTornEnd completes, once the sealed segments were scanned, a
// salvage's cut of a torn roll's damaged end that does not bear the mark
// of a write that never reached the disk (salvagesEnd). Its bytes cannot
// tell a torn write from a synced entry that rotted, its witness and the
// roll's writes lost to the crash, so the cut is reported in Salvaged as
// losing the most LSNs its bytes can hold, from the LSN after every record
// (or bounded damaged region) before it, and the log resumes past them: no
// LSN a synced entry had is given out again. When nothing before it bounds
// its first LSN, the salvage refuses (unboundedLoss).
func (l *Log) boundTornEnd() error {
	t := l.report.Torn
	if !l.tornEnd || t == nil {
		return nil
	}
	from, err := l.recordsEnd()
	if err != nil {
		return err
	}
	if from = max(from, l.resume); from == 0 {
		return unboundedLoss(l.seg.list[len(l.seg.list)-1], []Damage{{Offset: t.Offset, Bytes: t.Bytes}})
	}
	n := recordsHeld(t.Bytes)
	if n == 0 {
		return nil // too short to hold an entry: nothing of it was synced
	}
	t.FirstLSN, t.LastLSN = from, from+n-1
	t.Reason = fmt.Sprintf("cut at damage: %s; its bytes cannot tell a torn write from a synced entry that rotted, "+
		"so up to LSN %d, the most its %d bytes can hold, is taken as lost and never given out again", t.Reason, t.LastLSN, t.Bytes)
	l.report.Salvaged = append(l.report.Salvaged, *t)
	l.report.Torn = nil
	l.gap = max(l.gap, t.LastLSN+1)
	return nil
}

// tornMark reports whether the bytes of a segment from off to limit, its
// end, bear the mark of a write that never reached the disk: zeros only,
// or one frame that the end of the file cuts and that holds no whole
// entry. A synced entry's bytes can rot, but its file does not grow
// shorter or turn to zeros; a frame length rotted to run past the end
// leaves the entry whole behind it, maybe with a torn entry after it
// (wholeEntryAt), and that is damage, not a torn write.
func tornMark(r *segReader, off, limit int64) (bool, error) {
	if zero, err := zeroFilled(r, off, limit); err != nil || zero {
		return zero, err
	}
	b, err := r.bytes(off, int(min(limit-off, binary.MaxVarintLen64)), limit)
	if err != nil {
		return false, err
	}
	if _, _, err = decodeFrame(b, limit-off); !errors.Is(err, errShortFrame) {
		return false, nil
	}
	whole, err := wholeEntryAt(r, off, limit)
	return !whole, err
}

// wholeEntryAt reports whether a whole valid entry starts after a frame
// length of any width at off, its end found from its count and its
// records' framing rather than from the frame length, which may have
// rotted.
func wholeEntryAt(r *segReader, off, limit int64) (bool, error) {
	b, err := r.bytes(off, int(limit-off), limit)
	if err != nil {
		return false, err
	}
	for k := 1; k <= binary.MaxVarintLen64 && k+headerSize <= len(b); k++ {
		e := b[k:]
		h, err := peekHeader(e)
		if err != nil {
			continue
		}
		n, ok := entryLen(e, h)
		if ok && binary.LittleEndian.Uint32(e) == crc32.Checksum(e[offVersion:n], castagnoli) {
			return true, nil
		}
	}
	return false, nil
}

// entryLen returns the length of the entry at the start of e, whose header
// is h, that holds h.count framed records, and whether they fit in e.
func entryLen(e []byte, h entryHeader) (int, bool) {
	body := e[h.size():]
	for i := uint32(0); i < h.count; i++ {
		var err error
		if _, body, err = nextRecord(body); err != nil {
			return 0, false
		}
	}
	return len(e) - len(body), true
}

// boundedBefore reports whether a segment before list[i] holds a valid
// entry or a damaged region whose LSNs are known: what a salvage bounds
// the LSNs of later damage by (fillSalvaged). It scans them, from the
// nearest back, until one does.
func (l *Log) boundedBefore(i int) (bool, error) {
	r := &segReader{}
	for j := i - 1; j >= 0; j-- {
		s := l.seg.list[j]
		r.reset(s.file.f)
		res, err := scanSegment(r, scanSpec{seg: s, limit: s.size, resync: true})
		if err != nil {
			return false, err
		}
		if res.entries > 0 {
			return true, nil
		}
		for _, d := range res.damage {
			if d.LastLSN != 0 {
				return true, nil
			}
		}
	}
	return false, nil
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
	l.cut, l.report.Torn, l.tornNone = nil, nil, false
	if err := l.repairTail(s); err != nil {
		return err
	}
	l.dropTail = tail.path
	switch {
	case l.report.Torn == nil && s.size == 0:
		l.report.Torn = &Damage{Segment: s.path, Reason: "torn write: the segment is empty"}
	case l.report.Torn == nil: // whole: the tear fell on an entry boundary, nothing to cut
		l.report.Torn = &Damage{Segment: s.path, Offset: s.size, FirstLSN: s.endLSN,
			Reason: "torn write: the segment ends whole, short of SegmentSize, its last entries lost whole"}
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

// tornRollFound returns a copy of the torn roll that a read-only Open
// found and left on disk, or nil. Verify reads the segments the Open
// kept, which no longer list the roll's empty tail; when the tear fell on
// an entry boundary, nothing in them shows it.
func (l *Log) tornRollFound() *Damage {
	if !l.opts.ReadOnly || l.dropTail == "" || l.report.Torn == nil {
		return nil
	}
	t := *l.report.Torn
	return &t
}
