package wal

import (
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
	bad      *badSpot // first damage; nil when clean
	damage   []Damage // with resync: every damaged region
}

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
			res.damage = append(res.damage, skipDamage(r, sp, off, next, ok, want, nh, err.Error()))
			if !ok {
				return res, nil
			}
			ord += countFrames(r, off, next)
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
			res.goodEnd = off
		}
	}
	return res, nil
}

// skipDamage describes the region [off, next) skipped by a resync: LSNs
// want to nh.first-1 are lost. When no valid entry follows (ok false) the
// region runs to the end of the scan and the last LSN lost is unknown here.
func skipDamage(r *segReader, sp scanSpec, off, next int64, ok bool, want LSN, nh entryHeader, reason string) Damage {
	if !ok {
		next = sp.limit
	}
	d := Damage{Segment: sp.seg.path, Offset: off, Bytes: next - off,
		Entries: countFrames(r, off, next), Reason: reason}
	d.FirstLSN = want // 0 when unknown; completed by fillLost
	if ok && nh.first > 0 {
		d.LastLSN = nh.first - 1
	}
	return d
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
// damaged region held, where that is knowable.
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

func isFormatError(err error) bool {
	var fe formatError
	return errors.As(err, &fe)
}
