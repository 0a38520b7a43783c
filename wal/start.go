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
// it, while that segment is listed; once it was removed, its entries end
// where the next segment starts, in index and LSN. With neither segment
// listed nothing tells, and it fits.
func startFits(fsys FS, d dirListing) (bool, error) {
	name := d.start.index
	var hold, next *segName
	for i := range d.segs {
		if s := &d.segs[i]; s.index <= name {
			hold = s
		} else if next == nil {
			next = s
		}
	}
	if hold != nil {
		return startMatches(fsys, d.start.path, *hold, int(name-hold.index))
	}
	if next == nil {
		return true, nil
	}
	hs, err := headersOf(fsys, d.start.path, -1)
	if err != nil || uint64(len(hs)) != next.index-name {
		return false, err
	}
	nh, err := headersOf(fsys, next.path, 1)
	return err == nil && (len(nh) == 0 || hs[len(hs)-1].end() == nh[0].first), err
}

// startMatches reports whether the first entry header of the START file at
// path is that of the entry ord entries into the segment hold.
func startMatches(fsys FS, path string, hold segName, ord int) (bool, error) {
	hs, err := headersOf(fsys, hold.path, ord+1)
	if err != nil || len(hs) <= ord {
		return false, err
	}
	first, err := headersOf(fsys, path, 1)
	return err == nil && len(first) == 1 && first[0] == hs[ord], err
}

// headersOf returns the entry headers of the first n entries of the file
// at path (all of them when n < 0), as far as its frames are whole and
// their headers well formed; their CRCs are not checked.
func headersOf(fsys FS, path string, n int) (hs []entryHeader, err error) {
	sf, err := openSegFile(fsys, path)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := sf.release(); err == nil {
			err = cerr
		}
	}()
	fi, err := sf.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("wal: stat %s: %w", path, err)
	}
	r := &segReader{f: sf.f, ahead: 4 << 10}
	for off := int64(0); off < fi.Size() && (n < 0 || len(hs) < n); {
		size, h, err := r.header(off, fi.Size())
		if isFormatError(err) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("wal: read %s: %w", path, err)
		}
		hs = append(hs, h)
		off += size
	}
	return hs, nil
}
