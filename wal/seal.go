package wal

import (
	"fmt"
	"path/filepath"
)

// createPreRolled creates, empty, the segment that tidwall/wal rolls to
// before a batch's first entry when the tail is already past the segment
// size, and fsyncs the directory, before that batch is written. The part
// written then can fill that segment and roll again, creating the next
// file, before syncRolled fsyncs the directory: were the new segment's
// name not durable by then, a power loss could keep the name after it
// without it, an empty tail that is not the segment after the old one,
// which Open refuses though no record lost was reported durable.
// tidwall/wal opens the file it rolls to with O_CREATE|O_TRUNC, so it
// takes the empty file for its own (tidwall.go).
func (c *committer) createPreRolled() error {
	path := filepath.Join(c.l.dir, segmentName(c.nextIndex))
	if err := createEmpty(c.l.opts.FS, path, false, c.l.opts.FileMode); err != nil {
		return fmt.Errorf("%w (before segment roll), log poisoned", err)
	}
	return nil
}

// rollFullTail starts the next segment, at a writable Open, when the
// tail the repair left ends at exactly SegmentSize, before tidwall/wal
// opens the directory: it fsyncs the tail, then creates the segment that
// takes the next entry, empty, and fsyncs the directory (startSegment).
//
// tidwall/wal rolls a tail past SegmentSize itself, before the first
// entry of the next write (createPreRolled makes that segment's name
// durable first), but appends to one at exactly SegmentSize, which a
// power loss leaves when it takes the name of the segment a roll created
// after the entry that filled the sealed one to the byte. The next entry
// would then go into the full segment, and its roll create a segment
// named after that entry; a second power loss before the roll's fsyncs
// could keep the new name and lose the entry, leaving a whole segment of
// SegmentSize bytes under an empty tail named one past its end: what a
// missing segment leaves (tornroll.go: endsShort), which Open refuses
// with ErrCorrupt though nothing lost was acknowledged. Rolled here, no
// entry is ever written into a segment that reached SegmentSize, and the
// segment after it is named durably before anything is written there.
//
// The tail is fsynced first, as a roll fsyncs the segment it seals before
// the directory (syncRolled): its last entries may be a crashed process's,
// in the page cache alone.
func (l *Log) rollFullTail() error {
	n := len(l.seg.list)
	if n == 0 || l.seg.list[n-1].size != l.opts.SegmentSize {
		return nil // a tail past it is rolled by the first write (createPreRolled)
	}
	tail := l.seg.list[n-1]
	if err := tail.file.f.Datasync(); err != nil {
		return fmt.Errorf("wal: fsync %s before starting the next segment: %w", tail.path, err)
	}
	return l.startSegment("start the segment after a full tail")
}

// startSegment creates, at Open, the segment that takes the next entry,
// empty, and fsyncs the directory; the tail before it becomes a sealed
// segment. what says why, for an error.
func (l *Log) startSegment(what string) error {
	tail := l.seg.list[len(l.seg.list)-1]
	index := tail.firstIndex + uint64(tail.entries)
	path := filepath.Join(l.dir, segmentName(index))
	if err := createEmpty(l.opts.FS, path, true, l.opts.FileMode); err != nil {
		return fmt.Errorf("%w (%s)", err, what)
	}
	file, err := openSegFile(l.opts.FS, path)
	if err != nil {
		return err
	}
	tail.sealed = true
	l.seg.list = append(l.seg.list, &segment{path: path, firstIndex: index, file: file, indexed: true})
	return nil
}

// syncRolled fsyncs, through the Log's FS, each segment sealed by a roll
// (first, then the one before each later new segment in segs), then the
// directory, whose new names tidwall/wal does not fsync. The records of a
// sealed segment count as durable only after both, and nothing is written
// to the new segments before (committer.writeParts).
func (c *committer) syncRolled(first *segment, segs []*segment) error {
	sealed := append([]*segment{first}, segs[:len(segs)-1]...)
	for _, s := range sealed {
		if c.l.opts.plant == bugNoSealSync {
			break
		}
		if err := c.f.datasync(s.file.f); err != nil {
			return fmt.Errorf("wal: fsync of sealed segment %s failed, log poisoned: %w", s.path, err)
		}
	}
	if err := c.awaitFlush(); err != nil {
		return err
	}
	if c.l.opts.plant == bugNoRollDirSync {
		return nil
	}
	if err := SyncDirFS(c.l.opts.FS, c.l.dir); err != nil {
		return fmt.Errorf("%w (after segment roll), log poisoned", err)
	}
	return nil
}

// syncSealed fsyncs, through the Log's FS, every sealed segment, before a
// writable Open counts their records durable (setLSNs). A roll fsyncs the
// segment it seals only after the entries that sealed it were written
// (syncRolled): a process that died between the two left that segment's
// last entries in the page cache alone, where this Open finds them. Were
// they counted durable unsynced, the records appended next would be
// acknowledged by fsyncs of the tail alone, and a power loss could then
// tear the sealed segment under a tail that survived.
//
// Every sealed segment is fsynced, not only those the last batch sealed:
// nothing on disk says where that batch began, and a version of this
// package that did not fsync them here may have opened the directory
// after such a crash and rolled on, leaving an unsynced segment anywhere
// before the tail.
// An fsync of a segment whose pages are clean writes no data: it costs
// the call, and at most a flush of the disk's cache.
func (l *Log) syncSealed() error {
	list := l.seg.list
	for _, s := range list[:len(list)-1] {
		if err := s.file.f.Datasync(); err != nil {
			return fmt.Errorf("wal: fsync sealed segment %s: %w", s.path, err)
		}
	}
	return nil
}
