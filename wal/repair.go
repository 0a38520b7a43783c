package wal

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// This file repairs and salvages the segment format (segment.go,
// entry.go): the torn tail that Open cuts, and under Options.Salvage the
// damaged entries it skips and reports, with the LSNs each one lost.
// (A log that ends before MustReach is check.go's; reads that skip the
// lost LSNs are reader.go's.)

// repairTail checks the last segment, the only one that can hold bytes of
// an interrupted write (every other segment was fsynced when it was
// sealed). At the first entry that fails its checks it decides:
//
//   - If the valid entries after it show a torn write (tornPast), or none
//     follows, the tail is torn: it is cut (unless read-only) and reported
//     in Report.Torn.
//   - Otherwise the damage is not a torn write: ErrCorrupt, or under
//     Salvage a cut reported in Report.Salvaged.
//
// The cut (made by Open after its other checks) is an ftruncate followed by
// an fsync of the file and of the directory. On return s describes the whole entries kept.
func (l *Log) repairTail(s *segment) error {
	r := &segReader{f: s.file.f}
	res, err := scanSegment(r, scanSpec{seg: s, limit: s.size})
	if err != nil {
		return err
	}
	if res.bad != nil {
		clean, err := zeroFilled(r, res.goodEnd, s.size)
		if err != nil {
			return err
		}
		if clean { // zeros ahead of the tail (extend.go): a clean end, cut before tidwall/wal reads them
			l.cut = &tailCut{path: s.path, off: res.goodEnd}
		} else if err := l.handleTailDamage(r, s, res); err != nil {
			return err
		}
	}
	s.points, s.entries, s.firstLSN, s.endLSN = res.points, res.entries, res.firstLSN, res.endLSN
	s.size, s.indexed = res.goodEnd, true
	return nil
}

// trimSealed sizes the last sealed segment to its last whole entry when
// zeros follow it: the zeros the tail had ahead of its written end
// (extend.go), which its roll cuts before the directory sync; a crash can
// lose that cut, but only after the segment's last entry was written
// whole (tidwall/wal writes it before it creates the next file). Every
// other sealed segment was cut durably before the next roll. Bytes after
// the last entry that are not all zeros are left for the checks to judge,
// and so is a segment of zeros alone under a tail with entries. It runs
// before tornRoll, which then judges the segment by its entries: one that
// ends short of the tail's name is a torn roll, the zeros its lost
// writes. A writable Open cuts the zeros with the tail's cut.
func (l *Log) trimSealed(sealed []*segment) error {
	if len(sealed) == 0 {
		return nil
	}
	s := sealed[len(sealed)-1]
	if s.size == 0 {
		return nil
	}
	r := &segReader{f: s.file.f}
	last, err := r.bytes(s.size-1, 1, s.size)
	if err != nil || last[0] != 0 {
		return err
	}
	res, err := scanSegment(r, scanSpec{seg: s, limit: s.size})
	if err != nil || res.bad == nil {
		return err
	}
	if res.entries == 0 && l.seg.list[len(l.seg.list)-1].entries > 0 {
		return nil // damage under a tail with entries: the checks judge it
	}
	if clean, err := zeroFilled(r, res.goodEnd, s.size); err != nil || !clean {
		return err
	}
	s.size = res.goodEnd
	if !l.opts.ReadOnly {
		l.sealedCut = &tailCut{path: s.path, off: res.goodEnd}
	}
	return nil
}

// handleTailDamage classifies and reports the damage res.bad, and plans
// the cut that Open makes, when the Log is writable, after its checks.
func (l *Log) handleTailDamage(r *segReader, s *segment, res scanResult) error {
	bad := res.bad
	next, found, err := untornAfter(r, bad.off, s.size, res.endLSN)
	if err == nil && found && res.endLSN == 0 {
		next, found, err = l.untornAtStart(r, s)
	}
	if err != nil {
		return err
	}
	if found && !l.opts.Salvage {
		return corruptAt(s.loc(bad.off, bad.ord),
			fmt.Sprintf("%s; a valid entry follows at offset %d, so this is not a torn write", bad.reason, next))
	}
	if !found {
		d, err := tearDamage(r, s.path, bad.off, s.size, res.endLSN, res.version, bad.reason)
		if err != nil {
			return err
		}
		l.report.Torn = &d
		// A witness alone at the segment's start: no LSN lost, the one
		// it would have named is set with the log's next (setLSNs).
		l.tornNone = d.FirstLSN == 0 && d.Entries == 1 && tornWitness(r, bad.off, s.size, 0, res.version)
	} else {
		d := Damage{Segment: s.path, Offset: bad.off, Bytes: s.size - bad.off, Entries: countFrames(r, bad.off, s.size),
			Reason: "salvage cut the last segment at a damaged entry (" + bad.reason + "); the valid entries after it are dropped"}
		if d.FirstLSN, d.LastLSN, err = lostToSalvageCut(r, s, res.endLSN, next); err != nil {
			return err
		}
		l.report.Salvaged = append(l.report.Salvaged, d)
	}
	l.cut = &tailCut{path: s.path, off: bad.off} // once every check passed
	return nil
}

// A power loss tears the writes that no fsync covered, at sector
// granularity and in any order: over blocks the file already has (zeros
// written and fsynced ahead of the tail, say) a later sector, even a later
// whole entry, can reach the disk without an earlier one. So valid entries
// after damage do not by themselves make it damage rather than a tear.
// Each version-2 entry says what was durable when it was written (its
// Synced LSN, entry.go), and the tear rule rests on it. The damage starts
// at the first bad entry, whose records start at want = L+1 (L the last
// LSN of the whole entries before it). A valid entry found after it
// that starts at or before L is not an entry of the log's (LSNs only
// rise), but bytes a record holds (a copy of an earlier entry, say): it
// is passed over, as before version 2. The damage is a tear iff every
// other valid entry after it is of version 2 and was written when the
// log was durable up to L at most: no entry was written after an fsync
// that covered a record of the damaged region, so every byte there may
// have been unsynced, and torn. An entry past L is judged so however far
// past L it starts: a segment can start past an LSN gap (MustReach, a
// salvage's resume), so distance does not tell a copy from an entry. A
// version-1 entry tells nothing: as before version 2, one that can
// continue the log (no further past L than the bytes before it can
// number) makes the damage ErrCorrupt, and one that cannot is passed
// over. When the damage
// starts the segment, L is the end of the segment before it
// (untornAtStart); without L (no whole segment before it) nothing can be
// compared: any valid entry makes it ErrCorrupt.
//
// A Synced LSN understates what is durable: Close, Flush and interval
// fsyncs make records durable after their entries were written. So
// entries that pass the rule make the damage a tear only when it also
// has the shape a power loss leaves over zeros written ahead of the tail
// (tearShaped): a sector of it never written, and a whole sector of
// zeros at the file's end that no write reached. A closed log ends at its
// last entry. Shape alone is not enough (a record's own zeros look like a
// sector never written), so after such an fsync the log writes a witness
// (witness.go), a valid entry with no record whose Synced LSN covers
// them: like any such entry it makes damage before it ErrCorrupt.
//
// What the rule cannot tell: damage shaped as a tear (a sector of zeros)
// to records whose fsync completed, with no entry (witness included)
// written after that fsync and on the disk, in a file that ends in zeros,
// is cut as a tear, as damage to the last entry of a log always was.

// untornAfter applies the tear rule to the valid entries in (bad, limit)
// after damage that starts at offset bad and whose records start at want
// (0 when unknown). It returns the offset of the first valid entry that
// shows the damage is not a torn write, and whether there is one.
func untornAfter(r *segReader, bad, limit int64, want LSN) (int64, bool, error) {
	judged, end := int64(-1), int64(0) // the first entry judged torn by its Synced LSN; the end of the last
	for off := bad + 1; off < limit; {
		at, n, h, found, err := nextValid(r, off, limit)
		if err != nil {
			return 0, false, err
		}
		if !found {
			break
		}
		switch {
		case want == 0:
			return at, true, nil
		case h.first < want:
			off = at + 1 // not an entry of the log's (a record may hold one): search on inside it, as findValid does
			continue
		case h.version == entryVersion1:
			if h.first-want <= uint64(at) {
				return at, true, nil // can continue the log: as findValid would find it
			}
			off = at + 1
			continue
		case h.synced >= want:
			return at, true, nil
		}
		if judged < 0 {
			judged = at
		}
		off, end = at+n, at+n
	}
	if judged < 0 {
		return 0, false, nil // nothing valid follows: a torn tail, as always
	}
	torn, err := tearShaped(r, bad, judged, end, limit)
	if err != nil || torn {
		return 0, false, err
	}
	return judged, true, nil
}

// sectorSize is the unit a disk writes whole or not at all, and the
// alignment of the units a torn overwrite leaves (a page is 8 of them).
const sectorSize = 512

// tearShaped reports whether damage at [bad, next), followed by valid
// entries up to end, looks as a power loss leaves a write over zeros
// ahead of the tail: the damage holds an aligned sector that was never
// written (all zeros from bad, or from the sector's start, to its end, which is before next),
// and the file ends, past end, in a whole aligned sector of zeros that
// nothing was written to. A log that was closed, or never extended, ends
// at its last entry; a bit flip or garbage is not a sector left unwritten.
func tearShaped(r *segReader, bad, next, end, limit int64) (bool, error) {
	hole, err := zeroSector(r, bad, next)
	if err != nil || !hole {
		return false, err
	}
	last := (limit/sectorSize - 1) * sectorSize // the start of the last whole sector
	if last < end {
		return false, nil
	}
	return zeroFilled(r, last, limit)
}

// zeroSector reports whether an aligned sector that ends by to holds only
// zeros in its part from from on.
func zeroSector(r *segReader, from, to int64) (bool, error) {
	for s := from - from%sectorSize; s+sectorSize <= to; s += sectorSize {
		if zero, err := zeroFilled(r, max(s, from), s+sectorSize); err != nil || zero {
			return zero, err
		}
	}
	return false, nil
}

// untornAtStart applies the tear rule to damage at the start of the last
// segment s, which valid entries follow: the damaged records start where
// the segment before s ends, which a scan of that segment (sealed, so
// fsynced) tells when it is whole. Without it, the first valid entry
// after the damage makes it ErrCorrupt.
func (l *Log) untornAtStart(r *segReader, s *segment) (int64, bool, error) {
	want := LSN(0)
	if n := len(l.seg.list); n >= 2 && l.seg.list[n-1] == s {
		prev := l.seg.list[n-2]
		res, err := scanSegment(&segReader{f: prev.file.f}, scanSpec{seg: prev, limit: prev.size})
		if err != nil {
			return 0, false, err
		}
		if res.bad == nil {
			want = res.endLSN
		}
	}
	return untornAfter(r, 0, s.size, want)
}

// nextValid searches, byte by byte, for the first offset in [from, limit)
// where a whole valid entry of either version starts, with any LSN, and
// returns it, the frame's size and its header.
func nextValid(r *segReader, from, limit int64) (int64, int64, entryHeader, bool, error) {
	for off := from; off < limit; off++ {
		if _, _, err := r.header(off, limit); err != nil {
			if !isFormatError(err) {
				return 0, 0, entryHeader{}, false, err
			}
			continue
		}
		n, h, _, err := r.entry(off, limit)
		if err == nil {
			return off, n, h, true, nil
		}
		if !isFormatError(err) {
			return 0, 0, entryHeader{}, false, err
		}
	}
	return 0, 0, entryHeader{}, false, nil
}

// tailCut is a cut of the tail segment that Open decided on.
type tailCut struct {
	path string // the tail segment
	off  int64  // bytes kept
}

// tearDamage describes the torn region [off, limit) of a tail segment. It
// reads the entry headers that survived to say which LSNs were lost; want
// is the LSN the first torn entry would start at (0 when unknown), before
// the version of the entry before it (0 when none).
func tearDamage(r *segReader, path string, off, limit int64, want LSN, before byte, reason string) (Damage, error) {
	d := Damage{Segment: path, Offset: off, Bytes: limit - off, Entries: countFrames(r, off, limit),
		Reason: "torn write: " + reason}
	zero, err := zeroFilled(r, off, limit)
	if err != nil || zero || want == 0 || d.Entries == 0 {
		if zero {
			d.Reason = "torn write: zero-filled tail"
		}
		return d, err
	}
	d.FirstLSN = want
	for off < limit {
		n, h, err := tornHeader(r, off, limit)
		if err != nil || h.first != want {
			if err != nil && tornWitness(r, off, limit, want, before) {
				d.LastLSN = want - 1 // it holds no record: nothing more was lost
			}
			break
		}
		d.LastLSN, want, before = h.end()-1, h.end(), h.version
		off += n
	}
	return d, nil
}

// tornWitness reports whether the frame at off, which the end of the
// file at limit cuts, is a witness (witness.go) whose record would have
// been want: its length is a witness's, which no version-2 entry of
// records has, it is of version 2, and its count and first LSN, as far as
// they survived, are 0 and want (not checked when want is 0, unknown: a
// witness that starts its segment). Its version is read from its version
// byte; a frame cut before it is of version 2 when the entry before it,
// of version before, is: a writer of version-2 entries writes no other
// (an older release, whose entries of records can have a witness's
// length, does not open its log: doc.go).
func tornWitness(r *segReader, off, limit int64, want LSN, before byte) bool {
	b, err := r.bytes(off, int(min(limit-off, 10+maxHeaderSize)), limit)
	if err != nil {
		return false
	}
	size, k := binary.Uvarint(b)
	if k <= 0 || size != headerSize2 || off+int64(k)+int64(size) <= limit {
		return false
	}
	e := b[k:]
	version := before
	if len(e) > offVersion {
		version = e[offVersion]
	}
	if version != entryVersion2 {
		return false
	}
	if want != 0 && len(e) >= offFirstLSN+8 && binary.LittleEndian.Uint64(e[offFirstLSN:]) != want {
		return false
	}
	return len(e) < offCount+4 || binary.LittleEndian.Uint32(e[offCount:]) == 0
}

// tornHeader decodes the header of a frame that may run past the end.
func tornHeader(r *segReader, off, limit int64) (int64, entryHeader, error) {
	b, err := r.bytes(off, int(min(limit-off, 10+maxHeaderSize)), limit)
	if err != nil {
		return 0, entryHeader{}, err
	}
	k, size, err := decodeFrame(b, 1<<62)
	if err != nil {
		return 0, entryHeader{}, err
	}
	h, err := peekHeader(b[k:])
	return int64(k) + size, h, err
}

// lostToSalvageCut returns the LSNs of the entries a salvage cut drops: from
// want (the first LSN after the entries kept) to the last valid entry.
func lostToSalvageCut(r *segReader, s *segment, want LSN, next int64) (LSN, LSN, error) {
	rest, err := scanSegmentFrom(r, s, next)
	if err != nil || rest.endLSN == 0 {
		return want, 0, err
	}
	if want == 0 {
		want = rest.firstLSN
	}
	return want, rest.endLSN - 1, nil
}

// salvageSealed scans every sealed segment at Open, skipping damaged
// entries, and reports each skipped region with the LSNs it lost. It runs
// before the committer starts, so it needs no lock.
func (l *Log) salvageSealed(sealed []*segment) error {
	damage := make([][]Damage, len(l.seg.list))
	lone := make([][]bool, len(l.seg.list))
	r := &segReader{}
	for i, s := range sealed {
		r.reset(s.file.f)
		res, err := scanSegment(r, scanSpec{seg: s, limit: s.size, resync: true})
		if err != nil {
			return err
		}
		s.points, s.entries, s.firstLSN, s.endLSN, s.indexed = res.points, res.entries, res.firstLSN, res.endLSN, true
		damage[i], lone[i] = res.damage, res.lone
	}
	return l.fillSalvaged(damage, lone)
}

// fillSalvaged completes the LSN ranges of the damage found in each
// segment, bounds the entries each segment's damage held, reports LSN gaps
// between segments that no damage explains (a missing file), places
// segments without a valid entry, bounds the LSNs lost past the last
// record, and appends it all to the report.
func (l *Log) fillSalvaged(damage [][]Damage, lone [][]bool) error {
	list := l.seg.list
	var prevEnd LSN
	for i, s := range list {
		next := firstLSNAfter(list, i)
		if s.entries == 0 {
			s.firstLSN = max(next, prevEnd)
			s.endLSN = s.firstLSN
		}
		if prevEnd == 0 && l.resume == 0 && next == 0 {
			if err := unboundedLoss(s, damage[i]); err != nil {
				return err
			}
		}
		start := prevEnd
		if i == 0 {
			start = l.opts.StartLSN // damage before the first valid entry loses from there, as far as a report tells
		}
		ds := fillLost(damage[i], start, next)
		s.skipped = boundEntries(ds, lone[i])
		l.resume = boundLost(ds, l.resume)
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

// unboundedLoss refuses damage in s whose LSNs nothing bounds: no record
// and no region of known LSNs comes before it in the log (the caller
// checked), none after it, and it is not one entry whose header passed
// its CRC. Its first LSN is unknown (the log's front may have been
// truncated, or it began at a StartLSN that a reopen need not repeat), so
// its bytes bound no LSN, and resuming anywhere may give out again an LSN
// its entries had, which may have been synced.
func unboundedLoss(s *segment, ds []Damage) error {
	for _, d := range ds {
		if d.FirstLSN == 0 && d.LastLSN == 0 {
			return fmt.Errorf("%w: %s: %d damaged bytes from offset %d, and no record in the log before or after them, "+
				"so which LSNs the log gave out cannot be told and a salvage cannot resume without risking an LSN "+
				"its entries had; if you know an LSN past every one the log gave out, move %s and every segment "+
				"before it out of the log directory and open with Options.StartLSN set to it",
				ErrCorrupt, s.path, d.Bytes, d.Offset, filepath.Base(s.path))
		}
	}
	return nil
}

// boundEntries returns how many entries the damaged regions ds of one
// segment held, at least and at most (entriesHeld; one for a region that
// is one entry with a damaged length), and keeps each region's count of
// frames within those bounds.
func boundEntries(ds []Damage, lone []bool) span {
	var sum span
	for i := range ds {
		d := &ds[i]
		held := span{1, 1}
		if !lone[i] {
			held = entriesHeld(d.Bytes)
		}
		d.Entries = min(max(d.Entries, held.lo), held.hi)
		sum = sum.add(held)
	}
	return sum
}

// boundLost completes the damage past the last record of the log, whose
// last LSN no later record tells: a region's records cannot be read, but
// its bytes bound them (recordsHeld), so it is reported as losing the most
// LSNs its bytes can hold, from the LSN after everything before it. It
// returns the LSN after every LSN the damage ds, and from, can have held
// (from when ds lost none): the log resumes there, so no LSN a damaged,
// synced entry had is ever given out again. A region whose first LSN no
// record tells starts at from, past the regions before it; when from is 0
// too (nothing before it in the log), it is left unknown: unboundedLoss
// refused it unless a record follows it.
func boundLost(ds []Damage, from LSN) LSN {
	for i := range ds {
		d := &ds[i]
		if d.LastLSN == 0 && (d.FirstLSN != 0 || from != 0) {
			d.FirstLSN = max(d.FirstLSN, from)
			if n := recordsHeld(d.Bytes); n > 0 {
				d.LastLSN = d.FirstLSN + n - 1
				d.Reason += fmt.Sprintf("; no record follows to tell its last LSN: up to LSN %d, the most its %d bytes can hold, is taken as lost and never given out again",
					d.LastLSN, d.Bytes)
			}
		}
		if d.LastLSN != 0 {
			from = max(from, d.LastLSN+1)
		}
	}
	return from
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

// scanSegmentFrom scans s from off with resync, to learn the LSNs there.
func scanSegmentFrom(r *segReader, s *segment, off int64) (scanResult, error) {
	sub := &segReader{f: offsetReader{r.f, off}}
	return scanSegment(sub, scanSpec{seg: s, limit: s.size - off, resync: true})
}

// offsetReader reads a file from a fixed offset on.
type offsetReader struct {
	f   io.ReaderAt // the file
	off int64       // file offset that reads as offset 0
}

func (o offsetReader) ReadAt(p []byte, off int64) (int, error) { return o.f.ReadAt(p, o.off+off) }

// cutFile truncates a segment at off and makes the cut durable.
func cutFile(fsys FS, path string, off int64) error {
	f, err := fsys.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("wal: repair %s: %w", path, err)
	}
	err = f.Truncate(off)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("wal: repair %s: cut at offset %d: %w", path, off, err)
	}
	return SyncDirFS(fsys, filepath.Dir(path))
}
