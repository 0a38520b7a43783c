package wal

import (
	"errors"
	"fmt"
	"io/fs"
)

// A read-only Log may be opened beside a process that writes the log:
// while it lists and opens the segments, the writer rolls to new segments
// and TruncateFront removes old ones. The segment files it opened stay
// readable (a removed file lives on while open, and walq never rewrites a
// segment), but the listing itself can be torn. A directory is read in
// several getdents calls when it holds more names than one call returns
// (Go asks for 8 KiB at a time, about 170 segment names); a file created
// between two calls is returned or not depending on where its name hashes
// (ext4), so the listing can hold a segment the writer created after one it
// missed. Read as it is, that listing has a hole: a missing segment, which
// is ErrCorrupt. And a segment listed may be gone before it is opened.
//
// So a read-only Open lists the directory again after opening every file,
// and starts over when a listed file was gone or the second listing holds a
// segment inside the range of the first that the first lacks. Segments only
// ever appear after the tail and disappear from the front, so a hole in a
// listing that the next listing fills is a torn listing, never damage; a
// segment missing from both is reported as damage, as before. A hole that
// the front passed between the two listings (TruncateFront removed the
// segment missed, with those before it) shows in neither; but the Open
// needs nothing below the new front. So when the front moved (the first
// segment it listed is gone from the second listing), it drops the
// segments it opened below the second listing's first, and checks for
// holes over the rest only: it starts over if what is left does not begin
// at the new front (the first listing missed it, or the front passed every
// segment it opened) or has a hole the second listing shows.

// listTries bounds how many times a read-only Open lists the directory
// when a writer keeps changing it under the listing.
const listTries = 10

// errListingTorn is returned when a listing missed a segment that the
// next listing of the directory shows.
var errListingTorn = errors.New("wal: the directory changed while it was listed")

// openListed lists the segments and opens them. A read-only Log retries
// a listing a writer tore (see above).
func (l *Log) openListed() error {
	for try := 1; ; try++ {
		names, err := l.listSegments()
		if err != nil && l.opts.ReadOnly && errors.Is(err, errFrontUnlisted) && try < listTries {
			// A listing torn by a writer can hold the NAME.FRONT of a
			// truncation that keeps a segment its roll created during the
			// listing, and miss that segment: list again. A marker that
			// names no segment in every listing is refused (foreign).
			continue
		}
		if err != nil {
			return err // the directory itself cannot be listed: no writer tore that
		}
		err = l.openSegments(names)
		if err == nil && l.opts.ReadOnly {
			err = l.checkListing(names)
		}
		retry := errors.Is(err, errListingTorn) || errors.Is(err, fs.ErrNotExist)
		if err == nil || !l.opts.ReadOnly || !retry {
			return err
		}
		if try == listTries {
			return fmt.Errorf("wal: %d listings of %s in a row changed under a writer: %w", try, l.dir, err)
		}
		l.releaseAll()
	}
}

// checkListing lists the directory again and returns errListingTorn if
// it holds a segment between the first and last of names that names
// lacks. If the front moved past the first of names, it first drops the
// segments opened below the new front (see above).
func (l *Log) checkListing(names []segName) error {
	d, err := listDir(l.opts.FS, l.dir)
	if err != nil {
		return err
	}
	again := d.effective()
	if len(names) == 0 {
		if len(again) > 0 {
			return fmt.Errorf("%w: no segment listed, then %s", errListingTorn, again[0].path)
		}
		return nil
	}
	if len(again) > 0 && again[0].index > names[0].index {
		from := names[0].path
		if names = l.dropBelow(names, again[0].index); len(names) == 0 || names[0].index != again[0].index {
			return fmt.Errorf("%w: the front moved from %s to %s, which was not listed", errListingTorn, from, again[0].path)
		}
	}
	listed := make(map[uint64]bool, len(names))
	for _, n := range names {
		listed[n.index] = true
	}
	first, last := names[0].index, names[len(names)-1].index
	for _, n := range again {
		if n.index > first && n.index < last && !listed[n.index] {
			return fmt.Errorf("%w: %s was not listed the first time", errListingTorn, n.path)
		}
	}
	return nil
}

// dropBelow drops the opened segments, listed as names, that start below
// index, and returns the names of those left.
func (l *Log) dropBelow(names []segName, index uint64) []segName {
	l.seg.Lock()
	defer l.seg.Unlock()
	i := 0
	for i < len(l.seg.list) && l.seg.list[i].firstIndex < index {
		l.seg.list[i].drop()
		i++
	}
	l.seg.list = append([]*segment(nil), l.seg.list[i:]...)
	return names[i:]
}
