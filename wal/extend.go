package wal

import (
	"fmt"
	"os"
)

// The committer keeps the tail segment's file longer than its entries:
// zeros, written and fdatasynced ahead of the written end, so that the
// entries written next overwrite blocks the file already has. An
// fdatasync of such a write carries the data alone; one of an append
// must also commit the file's new size, which costs this disk 1.45 to
// 1.9 times as much (bench/results/fdatasync-2026-12-03.txt).
//
// The zeros are never an entry's. tidwall/wal writes at its own offset,
// the end of the entries it knows, never with O_APPEND, so its writes land
// on the zeros (tidwall_zeros_test.go pins that). What keeps them out of
// every reader's sight:
//
//   - readers read up to the end of the entries published (segment.size);
//   - Open takes zeros from the end of the last entry to the end of the
//     tail file for a clean end (repairTail), cuts them before
//     tidwall/wal opens the tail (it would read each zero byte as an empty
//     entry), and sizes the last sealed segment to its last whole entry;
//     a read-only Open and Verify take them for a clean end, as a live Log
//     would;
//   - the zeros never reach past the segment size (extendTarget), where
//     a sealed segment's last entry ends at the latest; should a sealed
//     file still hold more, a roll truncates it to its last entry and
//     fdatasyncs it before the directory sync (committer.openRolled,
//     syncRolled); the new tail is extended once the roll is adopted, by
//     the same commit;
//   - Close cuts them before its last fsync; so does the store before it
//     reopens tidwall/wal (reopenFront).
//
// A write, fdatasync or truncate of the extender that fails poisons the
// Log, as every failed write does.

// extendChunk is how far past the written end the tail's zeros reach
// after an extension; extendLow is how close the written end comes to
// them before the next one. Each extension writes extendChunk-extendLow
// bytes at least, so its fdatasync is paid once per that much of entries.
const (
	extendChunk = 1 << 20
	extendLow   = extendChunk / 4
	extendAlign = 4 << 10 // the zeros end on a page boundary
)

// extender is the committer's handle on the tail file's zeros; the
// committer's mu guards it.
type extender struct {
	f    File   // the tail file, opened for writing through the Log's FS; nil until the first extension, and after a roll
	path string // f's path
	end  int64  // the file's size: zeros, fdatasynced, from the written end (committer.tailBytes) to here when end > tailBytes
}

// zeroPiece is the zeros every extender writes from, a piece at a time;
// nothing writes into it.
var zeroPiece = make([]byte, 64<<10)

// extendTarget returns the end the tail's zeros should reach with tail
// bytes written in a segment of segSize, or 0 when they reach far enough.
// They stop at the last page boundary at or before segSize: the
// segment's last entry ends at segSize or past it (tidwall/wal rolls at
// the entry that takes it there), so a sealed segment never holds zeros
// after its last entry. Zeros past it would have to be cut at the roll,
// and a crash that lost that cut in a batch that rolled again would leave
// them in a segment other than the last sealed one, which Open does not
// trim: it would refuse the log.
func extendTarget(tail, end, segSize int64) int64 {
	if end-tail >= extendLow {
		return 0
	}
	limit := segSize / extendAlign * extendAlign
	target := min((tail+extendChunk)/extendAlign*extendAlign, limit)
	if target <= end || target <= tail {
		return 0
	}
	return target
}

// extend writes and fdatasyncs zeros ahead of the tail's written end when
// it nears the end of those written before. Not under SyncNever: no
// fsync there is made cheaper by the zeros, and their own write and
// fdatasync would cost the callers on the committer's path.
func (c *committer) extend() error {
	if c.l.opts.AppendOnly || c.l.opts.Sync == SyncNever {
		return nil
	}
	x := &c.ext
	if x.f != nil && x.path != c.tail.path {
		if err := c.releaseExtender(); err != nil {
			return err
		}
	}
	from := max(x.end, c.tailBytes)
	if x.f == nil {
		from = c.tailBytes // a new tail holds no zeros
	}
	target := extendTarget(c.tailBytes, from, c.l.opts.SegmentSize)
	if target == 0 {
		return nil
	}
	if x.f == nil {
		f, err := c.l.opts.FS.OpenFile(c.tail.path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("wal: open %s to extend it, log poisoned: %w", c.tail.path, err)
		}
		x.f, x.path, x.end = f, c.tail.path, c.tailBytes
	}
	for off := from; off < target; {
		n := min(target-off, int64(len(zeroPiece)))
		if _, err := x.f.WriteAt(zeroPiece[:n], off); err != nil {
			return fmt.Errorf("wal: extend %s to %d bytes failed, log poisoned: %w", c.tail.path, target, err)
		}
		off += n
	}
	if err := c.f.datasync(x.f); err != nil {
		return fmt.Errorf("wal: fsync of %s's zeros failed, log poisoned: %w", c.tail.path, err)
	}
	x.end = target
	return nil
}

// cutZeros truncates the extended tail file to size, its written end,
// when zeros follow it, and reports whether it did. The caller fsyncs the
// file.
func (c *committer) cutZeros(size int64) (bool, error) {
	x := &c.ext
	if x.f == nil || x.path != c.tail.path || x.end <= size {
		return false, nil
	}
	if err := x.f.Truncate(size); err != nil {
		return false, fmt.Errorf("wal: cut %s's zeros at offset %d failed, log poisoned: %w", x.path, size, err)
	}
	x.end = size
	return true, nil
}

// releaseExtender closes the extender's file.
func (c *committer) releaseExtender() error {
	x := &c.ext
	if x.f == nil {
		return nil
	}
	err, path := x.f.Close(), x.path
	x.f, x.path, x.end = nil, "", 0
	if err != nil {
		return fmt.Errorf("wal: close %s: %w", path, err)
	}
	return nil
}

// cutTail cuts the zeros after the tail's written end and leaves the file
// to be fsynced (by syncIfDirty): a closed log ends at its last entry. A
// failure poisons the Log.
func (c *committer) cutTail() error {
	cut, err := c.cutZeros(c.tailBytes)
	if err != nil {
		return c.l.poison(err)
	}
	if cut {
		c.dirty = true
	}
	return nil
}

// cutBeforeReopen cuts the zeros after the tail's written end before the
// store reopens tidwall/wal, which would read them as entries; the next
// fsync covers the cut, and the next commit extends the tail again.
func (c *committer) cutBeforeReopen() error {
	cut, err := c.cutZeros(c.tailBytes)
	if cut {
		c.dirty = true
	}
	return err
}
