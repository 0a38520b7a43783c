package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// scanSpec says which segment to scan and how.
type scanSpec struct {
	seg    *segment // path and first index (for locations)
	limit  int64    // bytes to scan
	want   LSN      // expected first LSN of the first entry; 0 when unknown
	resync bool     // continue after damage at the next valid entry
}

// badSpot is the first damage found by a scan without resync.
type badSpot struct {
	off    int64
	ord    int
	reason string
}

// scanResult describes what a scan found.
type scanResult struct {
	points   []point  // sparse index of the valid entries
	entries  int      // valid entries
	firstLSN LSN      // first LSN of the first valid entry; 0 if none
	endLSN   LSN      // LSN after the last valid entry; 0 if none
	goodEnd  int64    // offset after the last valid entry before the first damage
	version  byte     // version of the last valid entry before the first damage; 0 if none
	bad      *badSpot // first damage; nil when clean
	damage   []Damage // with resync: every damaged region
	lone     []bool   // with resync: per damaged region, whether it is one entry with a damaged length (loneEntry)
}

// span bounds a count: at least lo, at most hi.
type span struct {
	lo, hi int
}

// add returns the bounds of the sum of two counts.
func (s span) add(o span) span { return span{s.lo + o.lo, s.hi + o.hi} }

// scanSegment reads every entry of a segment and checks framing, CRC,
// version and LSN continuity. Without resync it stops at the first damage
// (reported in bad); with resync it skips to the next valid entry and
// records each skipped region. Only I/O failures are returned as errors.
func scanSegment(r *segReader, sp scanSpec) (scanResult, error) {
	var res scanResult
	want, ord, lastPoint := sp.want, 0, int64(-indexSpacing)
	for off := int64(0); off < sp.limit; {
		n, h, _, err := r.entry(off, sp.limit)
		if err == nil && want != 0 && h.first != want {
			err = formatError(fmt.Sprintf("%s: entry starts at LSN %d, want %d", errLSNOutOfLine, h.first, want))
		}
		if err != nil {
			if !isFormatError(err) {
				return res, fmt.Errorf("wal: scan %s: %w", sp.seg.loc(off, ord), err)
			}
			if res.bad == nil {
				res.bad = &badSpot{off: off, ord: ord, reason: err.Error()}
			}
			if !sp.resync {
				return res, nil
			}
			next, nh, ok, err2 := findValid(r, off+1, sp.limit, want)
			if err2 != nil {
				return res, err2
			}
			d, lone, err2 := skipDamage(r, sp, off, next, ok, want, nh, err.Error())
			if err2 != nil {
				return res, err2
			}
			res.damage, res.lone = append(res.damage, d), append(res.lone, lone)
			if !ok {
				return res, nil
			}
			ord += d.Entries
			off, want, lastPoint = next, nh.first, -indexSpacing // always index a resync target
			continue
		}
		if off-lastPoint >= indexSpacing {
			res.points = append(res.points, point{lsn: h.first, off: off, ord: ord})
			lastPoint = off
		}
		if res.entries == 0 {
			res.firstLSN = h.first
		}
		res.entries++
		res.endLSN, want = h.end(), h.end()
		off += n
		ord++
		if res.bad == nil {
			res.goodEnd, res.version = off, h.version
		}
	}
	return res, nil
}

// skipDamage describes the region [off, next) skipped by a resync: LSNs
// want to nh.first-1 are lost. When no valid entry follows (ok false) the
// region runs to the end of the scan and the last LSN lost is unknown here,
// unless the region is one entry with a damaged length (loneEntry, which
// it reports).
func skipDamage(r *segReader, sp scanSpec, off, next int64, ok bool, want LSN, nh entryHeader, reason string) (Damage, bool, error) {
	if !ok {
		next, nh = sp.limit, entryHeader{}
	}
	d := Damage{Segment: sp.seg.path, Offset: off, Bytes: next - off, Reason: reason}
	d.FirstLSN = want // 0 when unknown; completed by fillLost
	if ok && nh.first > 0 {
		d.LastLSN = nh.first - 1
	}
	h, lone, err := loneEntry(r, off, next, want, nh.first)
	if err != nil {
		return d, false, err
	}
	if lone {
		d.Entries, d.FirstLSN, d.LastLSN = 1, h.first, h.end()-1
		d.Reason += " (the frame length is damaged; the entry itself passes its checks)"
		return d, true, nil
	}
	d.Entries = countFrames(r, off, next) // bounded by entriesHeld
	return d, false, nil
}

// minFrame is the fewest bytes a frame can take: a one-byte length, the
// entry header, and one empty record (its one-byte length).
const minFrame = 1 + headerSize + 1

// entriesHeld bounds how many entries a damaged region of n bytes held.
// Its first frame starts where the region does, so one at least; each
// takes minFrame bytes at least (a witness, which holds no record and
// takes no LSN, takes more: witness.go). The LSNs the region lost bound
// nothing, since a witness takes none. No frame length is read: a length
// is not covered by any CRC, so after a CRC failure none can be trusted.
func entriesHeld(n int64) span {
	return span{1, max(int(n/minFrame), 1)}
}

// recordsHeld is the most records a damaged region of n bytes can have
// held: one entry holding one-byte records (more entries take more bytes
// each).
func recordsHeld(n int64) uint64 {
	if n < minFrame {
		return 0
	}
	return uint64(n - minFrame + 1)
}

// loneEntry reports whether the region [off, end) is a single entry whose
// frame length alone is damaged: the bytes after a length as long as the
// one the region's size needs pass every check of an entry (the CRC among
// them), starting at want and ending before next (each 0 when unknown).
// It then returns the entry's header, which the CRC vouches for.
func loneEntry(r *segReader, off, end int64, want, next LSN) (entryHeader, bool, error) {
	var buf [binary.MaxVarintLen64]byte
	for k := int64(1); k <= binary.MaxVarintLen64 && off+k+headerSize <= end; k++ {
		n := end - off - k
		if int64(binary.PutUvarint(buf[:], uint64(n))) != k {
			continue
		}
		e, err := r.bytes(off+k, int(n), end)
		if err != nil {
			return entryHeader{}, false, err
		}
		h, err := decodeEntry(e)
		if err == nil && (want == 0 || h.first == want) && (next == 0 || h.end() == next) {
			return h, true, nil
		}
	}
	return entryHeader{}, false, nil
}

// findValid searches, byte by byte, for the first offset in [from, limit)
// where a whole valid entry starts. When floor (the first LSN after the last
// valid entry) is not 0, only entries that can continue the log count: they
// start at or after floor, and no further after it than there are bytes
// before them (every record takes at least one byte). These checks, and the
// ones of header, reject almost every offset before the CRC is computed.
func findValid(r *segReader, from, limit int64, floor LSN) (int64, entryHeader, bool, error) {
	for off := from; off < limit; off++ {
		_, h, err := r.header(off, limit)
		if err != nil || (floor != 0 && (h.first < floor || h.first-floor > uint64(off))) {
			if err != nil && !isFormatError(err) {
				return 0, h, false, err
			}
			continue
		}
		if _, h, _, err = r.entry(off, limit); err == nil {
			return off, h, true, nil
		} else if !isFormatError(err) {
			return 0, h, false, err
		}
	}
	return 0, entryHeader{}, false, nil
}

// countFrames counts the tidwall/wal frames that can be delimited in
// [off, end): each starts with a readable non-zero length. A frame that runs
// past end counts if it starts inside the region. It is how many entries a
// damaged region held when its lengths are intact, which nothing checks: a
// salvage reports it only within the bounds entriesHeld proves, and no
// decision rests on it.
func countFrames(r *segReader, off, end int64) int {
	n := 0
	for off < end {
		b, err := r.bytes(off, int(min(end-off, 10)), end)
		if err != nil {
			return n
		}
		k, size, err := decodeFrame(b, 1<<62)
		if err != nil {
			return n
		}
		n++
		off += int64(k) + size
	}
	return n
}

// zeroFilled reports whether [off, end) holds only zero bytes.
func zeroFilled(r *segReader, off, end int64) (bool, error) {
	for off < end {
		n := int(min(end-off, readAhead))
		b, err := r.bytes(off, n, end)
		if err != nil {
			return false, err
		}
		for _, c := range b {
			if c != 0 {
				return false, nil
			}
		}
		off += int64(n)
	}
	return true, nil
}

// isFormatError reports whether err is, or wraps, a formatError. The
// repair's searches ask it at every byte offset of a damaged region, so
// the unwrapped error, the usual one there, is told by a type assertion
// before errors.As.
func isFormatError(err error) bool {
	if _, ok := err.(formatError); ok {
		return true
	}
	var fe formatError
	return err != nil && errors.As(err, &fe)
}
