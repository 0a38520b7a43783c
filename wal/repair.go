package wal

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// repairTail checks the last segment, the only one that can hold bytes of
// an interrupted write (every other segment was fsynced when it was
// sealed). At the first entry that fails its checks it decides:
//
//   - If a valid entry starts at any later offset, the damage is not a torn
//     write: ErrCorrupt, or under Salvage a cut reported in Report.Salvaged.
//   - Otherwise the tail is torn: it is cut (unless read-only) and reported
//     in Report.Torn.
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
		if err := l.handleTailDamage(r, s, res); err != nil {
			return err
		}
	}
	s.points, s.entries, s.firstLSN, s.endLSN = res.points, res.entries, res.firstLSN, res.endLSN
	s.size, s.indexed = res.goodEnd, true
	return nil
}

// handleTailDamage classifies and reports the damage res.bad, and plans
// the cut that Open makes, when the Log is writable, after its checks.
func (l *Log) handleTailDamage(r *segReader, s *segment, res scanResult) error {
	bad := res.bad
	next, _, found, err := findValid(r, bad.off+1, s.size, res.endLSN)
	if err != nil {
		return err
	}
	if found && !l.opts.Salvage {
		return corruptAt(s.loc(bad.off, bad.ord),
			fmt.Sprintf("%s; a valid entry follows at offset %d, so this is not a torn write", bad.reason, next))
	}
	if !found {
		d, err := tearDamage(r, s.path, bad.off, s.size, res.endLSN, bad.reason)
		if err != nil {
			return err
		}
		l.report.Torn = &d
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

// tailCut is a cut of the tail segment that Open decided on.
type tailCut struct {
	path string // the tail segment
	off  int64  // bytes kept
}

// tearDamage describes the torn region [off, limit) of a tail segment. It
// reads the entry headers that survived to say which LSNs were lost; want
// is the LSN the first torn entry would start at (0 when unknown).
func tearDamage(r *segReader, path string, off, limit int64, want LSN, reason string) (Damage, error) {
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
			break
		}
		d.LastLSN, want = h.end()-1, h.end()
		off += n
	}
	return d, nil
}

// tornHeader decodes the header of a frame that may run past the end.
func tornHeader(r *segReader, off, limit int64) (int64, entryHeader, error) {
	b, err := r.bytes(off, int(min(limit-off, 10+headerSize)), limit)
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
