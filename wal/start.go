package wal

import (
	"errors"
	"fmt"
	"io"
)

// An older walq truncated the log's front with tidwall/wal, which copies
// the kept segment's entries from index NAME on to NAME.START, removes the
// segments up to NAME, the one holding NAME last, then renames the copy to
// NAME; Open finishes a truncation a crash interrupted (finishStart). A
// START file is taken for such a copy only when its first entry is valid
// (startsWithEntry) and is the log's entry at index NAME (startFits):
// finishing any other file would remove the segments up to NAME and put
// records with other LSNs in their place.

// startFits reports whether the START file's entries are the log's from
// its index on, as far as the segments left tell: its first entry has the
// first LSN and count of the entry at that index in the segment holding
// it, while that segment is listed and holds it; once it was removed, or
// lost that entry with all after it (a tail a power loss cut short or
// zero-filled: the copy was fsynced, the tail maybe not), the copy must
// follow on from the entry before its index, where a listed segment holds
// it, and its entries end where the next segment starts, in index and
// LSN. With nothing listed to tell, it fits.
func startFits(fsys FS, d dirListing) (bool, error) {
	name := d.start.index
	var before, hold, next *segName
	for i := range d.segs {
		if s := &d.segs[i]; s.index <= name {
			before, hold = hold, s
		} else if next == nil {
			next = s
		}
	}
	if hold != nil {
		fit, told, err := startMatches(fsys, d.start.path, *hold, int(name-hold.index), before)
		if err != nil || told {
			return fit, err
		}
	}
	if next == nil {
		return true, nil
	}
	hs, _, err := headersOf(fsys, d.start.path, -1)
	if err != nil || uint64(len(hs)) != next.index-name {
		return false, err
	}
	nh, _, err := headersOf(fsys, next.path, 1)
	return err == nil && (len(nh) == 0 || hs[len(hs)-1].end() == nh[0].first), err
}

// startMatches compares the first entry header of the START file at path
// with that of the entry ord entries into the segment hold, and says so
// (told). When hold ends blank (nothing or zeros) right before that
// entry, hold lost it and tells nothing of it: the copy's first entry
// must then follow on from the entry before, in hold or at the end of the
// segment before it (before, when listed), and told is false.
func startMatches(fsys FS, path string, hold segName, ord int, before *segName) (fit, told bool, err error) {
	hs, end, err := headersOf(fsys, hold.path, ord+1)
	if err != nil {
		return false, true, err
	}
	first, _, err := headersOf(fsys, path, 1)
	if err != nil || len(first) == 0 {
		return false, true, err
	}
	if len(hs) > ord {
		return first[0] == hs[ord], true, nil
	}
	if lost, err := blankFrom(fsys, hold.path, end); err != nil || len(hs) < ord || !lost {
		return false, true, err
	}
	switch {
	case ord > 0:
		return false, hs[ord-1].end() != first[0].first, nil
	case before != nil:
		ok, err := segmentEndsAt(fsys, *before, first[0].first)
		return false, err != nil || !ok, err
	}
	return false, false, nil
}

// blankFrom reports whether the file at path holds nothing but zeros from
// offset off on.
func blankFrom(fsys FS, path string, off int64) (blank bool, err error) {
	sf, err := openSegFile(fsys, path)
	if err != nil {
		return false, err
	}
	defer func() {
		if cerr := sf.release(); err == nil {
			err = cerr
		}
	}()
	fi, err := sf.f.Stat()
	if err != nil {
		return false, fmt.Errorf("wal: stat %s: %w", path, err)
	}
	return zeroFilled(&segReader{f: sf.f}, off, fi.Size())
}

// segmentEndsAt reports whether the last entry of the segment s is valid
// and ends before LSN want (endsAt).
func segmentEndsAt(fsys FS, s segName, want LSN) (ok bool, err error) {
	sf, err := openSegFile(fsys, s.path)
	if err != nil {
		return false, err
	}
	defer func() {
		if cerr := sf.release(); err == nil {
			err = cerr
		}
	}()
	fi, err := sf.f.Stat()
	if err != nil {
		return false, fmt.Errorf("wal: stat %s: %w", s.path, err)
	}
	if ok, err = endsAt(sf.f, fi.Size(), want); err != nil {
		return false, fmt.Errorf("wal: read %s: %w", s.path, err)
	}
	return ok, nil
}

// headersOf returns the entry headers of the first n entries of the file
// at path (all of them when n < 0), as far as its frames are whole and
// their headers well formed, and the offset where the last of them ends;
// their CRCs are not checked.
func headersOf(fsys FS, path string, n int) (hs []entryHeader, end int64, err error) {
	sf, err := openSegFile(fsys, path)
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		if cerr := sf.release(); err == nil {
			err = cerr
		}
	}()
	fi, err := sf.f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("wal: stat %s: %w", path, err)
	}
	r := &segReader{f: sf.f, ahead: 4 << 10}
	for end < fi.Size() && (n < 0 || len(hs) < n) {
		size, h, err := r.header(end, fi.Size())
		if isFormatError(err) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, 0, fmt.Errorf("wal: read %s: %w", path, err)
		}
		hs = append(hs, h)
		end += size
	}
	return hs, end, nil
}
