package wal

import (
	"encoding/binary"
	"fmt"
	"io"
	"path/filepath"
)

// This file holds the checks Open runs on the shape of the log, besides
// the entry checks of the tail scan: sealed segments follow on from each
// other, the tail segment is one walq wrote, and the log reaches the LSN
// its caller relies on (Options.MustReach). Verify, which reads every
// entry, checks the reach through the same function (reached) and the
// segment boundaries by its full scan; the tail's name was checked when the
// Log it runs on was opened.

// checkSealedEnds checks that every sealed segment's last entry ends at
// the LSN the next segment starts at: a segment file that is missing in the
// middle of the log, which first headers alone cannot show, fails here at
// Open rather than at the first read that reaches the gap. It reads only
// the end of each segment (about its last entry).
func (l *Log) checkSealedEnds() error {
	list := l.seg.list
	for i := 0; i+1 < len(list); i++ {
		s, next := list[i], list[i+1]
		if next.size == 0 || s.size == 0 {
			continue
		}
		ok, err := endsAt(s.file.f, s.size, next.firstLSN)
		if err != nil {
			return fmt.Errorf("wal: read %s: %w", s.loc(s.size, -1), err)
		}
		if !ok {
			return corruptAt(next.loc(0, 0), fmt.Sprintf(
				"%s: segment starts at LSN %d, but no entry at the end of the previous segment %s ends there (a segment file is missing or damaged)",
				errLSNOutOfLine, next.firstLSN, filepath.Base(s.path)))
		}
	}
	return nil
}

// endWalk is how many frames endsAt follows from a segment's start before
// it searches backwards from the end instead.
const endWalk = 64

// endsAt reports whether the last entry of the segment file f, size bytes
// long, is valid and ends with the LSN before want. A segment of few
// (large) entries is walked frame by frame from its start; otherwise the
// end is searched backwards, doubling the bytes read, for a frame that ends
// exactly at size and passes every check (a frame nested in a payload can
// end there too, so a candidate with other LSNs does not stop the search).
// Either way it reads about one entry.
func endsAt(f io.ReaderAt, size int64, want LSN) (bool, error) {
	ok, done, err := walkToEnd(f, size, want)
	if done || err != nil {
		return ok, err
	}
	for back := min(size, 4<<10); ; back = min(size, 2*back) {
		buf := make([]byte, back)
		if _, err := f.ReadAt(buf, size-back); err != nil {
			return false, err
		}
		if findEnding(buf, want) {
			return true, nil
		}
		if back == size {
			return false, nil
		}
	}
}

// walkToEnd follows up to endWalk frame lengths of a segment from its
// start; if it reaches the last frame it checks that one's header (its CRC
// is checked when the segment is first read, as for any entry) and reports
// done.
func walkToEnd(f io.ReaderAt, size int64, want LSN) (ok, done bool, err error) {
	r := &segReader{f: f, ahead: 4 << 10}
	off := int64(0)
	for i := 0; i < endWalk && off < size; i++ {
		b, err := r.bytes(off, int(min(size-off, binary.MaxVarintLen64)), size)
		if err != nil {
			return false, true, err
		}
		k, n, err := decodeFrame(b, size-off)
		if err != nil {
			return false, true, nil // a damaged frame
		}
		if next := off + int64(k) + n; next < size {
			off = next
			continue
		}
		_, h, err := r.header(off, size)
		if err != nil && !isFormatError(err) {
			return false, true, err
		}
		return err == nil && h.end() == want, true, nil
	}
	return false, false, nil
}

// findEnding reports whether some offset of buf starts a valid entry frame
// that ends exactly at the end of buf and whose records end before want.
func findEnding(buf []byte, want LSN) bool {
	for off := len(buf) - headerSize - 2; off >= 0; off-- {
		n, k := binary.Uvarint(buf[off:])
		if k <= 0 || n != uint64(len(buf)-off-k) {
			continue
		}
		h, err := decodeEntry(buf[off+k:])
		if err == nil && h.end() == want {
			return true
		}
	}
	return false
}

// checkTailName checks that a tail segment without one valid entry is
// where walq's next segment would be: named by the index after the last
// entry of the segment before it, the damaged entries a salvage skipped
// there counted (they were written, and the index moved past them). A file
// that merely has a segment's name (any junk of a few bytes) is then
// refused, never cut: walq changes only files it wrote.
//
// How many entries a damaged region held cannot always be told (a frame
// length is covered by no CRC): the region's bytes and lost LSNs only
// bound it (segment.skipped). A name outside the bounds is refused. A name
// inside them is taken when the bounds are one count, when the file holds
// nothing but zeros (taking it destroys nothing), or when its bytes start
// as the log's next entry would (tornFirstWrite): a first write a crash
// tore. Otherwise Open refuses, saying what to do, rather than cut a file
// that may not be walq's.
func (l *Log) checkTailName(tail *segment) error {
	list := l.seg.list
	if len(list) < 2 {
		return nil
	}
	prev := list[len(list)-2]
	if err := l.buildIndex(prev, false); err != nil { // the tail's name is checked below
		return err
	}
	lo := prev.firstIndex + uint64(prev.entries+prev.skipped.lo)
	hi := prev.firstIndex + uint64(prev.entries+prev.skipped.hi)
	switch {
	case tail.firstIndex < lo:
		return l.insideSegment(prev, tail, lo)
	case tail.firstIndex > hi && hi == lo && l.sizeUnknown():
		if blank, err := l.emptyTail(tail); err != nil || blank {
			return l.unknownRoll(prev, tail, hi, err)
		}
		fallthrough
	case tail.firstIndex > hi:
		return fmt.Errorf("%w: %s holds no valid entry and is not the segment after %s (that would be %s): "+
			"segments before it are missing, or it is not a file of this log; restore the missing segments "+
			"if you can: moving the file out lets the log open, but then the LSNs of missing segments "+
			"(a queue's message sequence numbers) can be given out again",
			ErrCorrupt, tail.path, filepath.Base(prev.path), indexRange(lo, hi))
	case lo == hi:
		return nil
	}
	blank, err := l.emptyTail(tail)
	if err != nil || blank {
		return err
	}
	if torn, err := l.tornFirstWrite(tail); err != nil || torn {
		return err
	}
	return fmt.Errorf("%w: %s holds no valid entry, and the damage in %s hides how many entries it held, "+
		"so whether %s is the segment walq wrote after it (that would be %s) cannot be told: "+
		"if the file is not walq's, move it out of the log directory; if it is (a first write a crash tore), "+
		"remove it; then open again",
		ErrCorrupt, tail.path, filepath.Base(prev.path), filepath.Base(tail.path), indexRange(lo, hi))
}

// insideSegment refuses a tail without one valid entry named below lo,
// the least index walq's next segment after prev can have: inside prev's
// entries, where no segment of walq's starts (each is named after the last
// entry of the one before), so no segment can be missing before it. It is
// a file walq never wrote (ErrForeign), to be moved out; no open, salvage
// or repair changes it.
func (l *Log) insideSegment(prev, tail *segment, lo uint64) error {
	return fmt.Errorf("%w: %w: %s holds no valid entry and is named inside %s, whose entries run below index %d: "+
		"walq names each segment after the last entry of the one before, so this is no segment of this log, nor a "+
		"torn write to one; no open, salvage or repair changes it: move it out of the log directory (it holds no "+
		"record), then open again",
		ErrCorrupt, ErrForeign, tail.path, filepath.Base(prev.path), lo)
}

// unknownRoll refuses an empty tail named past prev, which ends whole at
// index next, for an open that does not know the writer's SegmentSize
// (sizeUnknown): a missing segment after prev and a torn roll that lost
// prev's last entries whole (which an Open given SegmentSize cuts when
// prev is shorter than it: endsShort) look alike to it, and it says so.
func (l *Log) unknownRoll(prev, tail *segment, next uint64, err error) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: %w: %s holds nothing and is named past %s, which ends whole before index %d: either segments "+
		"between them are missing, or a crash during the roll that created %s lost the last entries of %s whole "+
		"(a torn roll, which an Open given the writer's Options.SegmentSize cuts by itself when %s, %d bytes, is "+
		"shorter than it); this open was not given SegmentSize and cannot tell which: open the log with the "+
		"writer's SegmentSize; if it still refuses, restore the missing segments if you can (moving %s out lets "+
		"the log open, but then the LSNs of missing segments can be given out again)",
		ErrCorrupt, ErrSegmentSizeUnknown, tail.path, filepath.Base(prev.path), next, filepath.Base(tail.path), filepath.Base(prev.path),
		filepath.Base(prev.path), prev.size, filepath.Base(tail.path))
}

// tornFirstWrite reports whether the tail file, which holds no valid
// entry, starts as the log's next entry would: the first write to the
// tail, torn by a crash. Its first bytes must hold a frame length and the
// entry's version, and every field of the entry header they hold must be
// what walq writes there (startsEntry): the first LSN among those the log
// can have reached (after its last record, up to the most the damage past
// it can have held), a count the length can hold. The CRC is not checked:
// the entry is not whole.
func (l *Log) tornFirstWrite(tail *segment) (bool, error) {
	end, err := l.recordsEnd()
	if err != nil || end == 0 {
		return false, err
	}
	b := make([]byte, binary.MaxVarintLen64+maxHeaderSize)
	n, err := tail.file.f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return false, fmt.Errorf("wal: read %s: %w", tail.path, err)
	}
	return startsEntry(b[:n], end, max(end, l.resume)), nil
}

// startsEntry reports whether b, the first bytes of a file, start a frame
// of walq's: a minimally encoded length that an entry can have, then as
// much of an entry header as b holds, the version byte at least, with a
// first LSN from first to last and a count of records the length can hold.
func startsEntry(b []byte, first, last LSN) bool {
	size, k := binary.Uvarint(b)
	if k <= 0 || uvarintLen(size) != k {
		return false
	}
	e := b[k:]
	if len(e) <= offVersion {
		return false
	}
	n := uint64(headerLen(e[offVersion]))
	if n == 0 || size < n+1 {
		return false
	}
	if len(e) >= offCount {
		if lsn := binary.LittleEndian.Uint64(e[offFirstLSN:]); lsn < first || lsn > last {
			return false
		}
	}
	if len(e) >= headerSize1 {
		if count := binary.LittleEndian.Uint32(e[offCount:]); count == 0 || uint64(count) > size-n {
			return false
		}
	}
	return true
}

// indexRange names the segment file of index lo, or of one of lo to hi.
func indexRange(lo, hi uint64) string {
	if lo == hi {
		return segmentName(lo)
	}
	return fmt.Sprintf("one of %s to %s", segmentName(lo), segmentName(hi))
}

// checkReach checks that the log holds every record up to MustReach. A log
// that ends before it lost records its caller relied on: that is damage,
// never a torn write, and Open fails with ErrCorrupt before changing
// anything. Under Salvage the loss is reported and the log resumes after
// MustReach (see resumeAfterGap).
func (l *Log) checkReach() error {
	end, err := l.recordsEnd()
	if err != nil {
		return err
	}
	where := l.dir
	if n := len(l.seg.list); n > 0 {
		where = l.seg.list[n-1].path
	}
	if l.reached(&l.report, where, end) {
		return nil
	}
	if !l.opts.Salvage {
		d := l.report.Salvaged[len(l.report.Salvaged)-1]
		return fmt.Errorf("%w: %s", ErrCorrupt, d.Reason)
	}
	l.gap = max(l.gap, l.opts.MustReach+1)
	return nil
}

// reachDamage describes the records lost between end (the LSN after the
// last record; 0 when the log holds none) and must; where is the last
// segment, or the directory when there is none.
func reachDamage(where string, end, must LSN) Damage {
	last := "no record"
	if end != 0 {
		last = fmt.Sprintf("LSN %d", end-1)
	}
	return Damage{Segment: where, FirstLSN: end, LastLSN: must,
		Reason: fmt.Sprintf("the log ends at %s (%s), before LSN %d that must be in it (the snapshot reflects it): "+
			"records were lost, which is damage, not a torn write", last, filepath.Base(where), must)}
}

// reached checks rep against MustReach for a log whose records end before
// end (0: none): when it ends before MustReach, a torn tail is part of the
// loss, and the loss is added to Salvaged. It reports whether the log
// reaches far enough.
func (l *Log) reached(rep *Report, where string, end LSN) bool {
	must := l.opts.MustReach
	if must == 0 || end > must {
		return true
	}
	if t := rep.Torn; t != nil { // the cut is part of the loss, not a torn write
		t.Reason = "cut at damage: " + t.Reason
		rep.Salvaged = append(rep.Salvaged, *t)
		rep.Torn = nil
	}
	rep.Salvaged = append(rep.Salvaged, reachDamage(where, end, must))
	return false
}

// recordsEnd returns the LSN after the last record in the log, or 0 when
// the log holds none.
func (l *Log) recordsEnd() (LSN, error) {
	for i := len(l.seg.list) - 1; i >= 0; i-- {
		s := l.seg.list[i]
		if err := l.ensureIndexed(s); err != nil {
			return 0, err
		}
		if s.entries > 0 {
			return s.endLSN, nil
		}
	}
	return 0, nil
}

// resumeAfterGap makes the next record start a new segment when a
// salvaging Open found the log ending before MustReach: the records up to
// MustReach are lost, and the next LSN is MustReach+1 so that none is ever
// reused. The LSN gap then lies at a segment boundary, where a caller can
// cut it off (TruncateFront) once it has copied what it needs past it.
func (l *Log) resumeAfterGap() error {
	if l.gap == 0 || len(l.seg.list) == 0 {
		return nil
	}
	tail := l.seg.list[len(l.seg.list)-1]
	if tail.size == 0 {
		return nil // the empty tail takes the next record
	}
	return l.startSegment("start a segment after the lost records")
}
