package wal

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Under SyncAlways the committer keeps the tail segment's file longer
// than its entries: zeros, written and fdatasynced ahead of the written
// end, so that the entries written next overwrite blocks the file
// already has. An fdatasync of such a write carries the data alone; one
// of an append must also commit the file's new size, which costs this
// disk 1.45 to 1.9 times as much (bench/results/fdatasync-2026-12-03.txt).
//
// Under SyncAlways the zeros cost the callers no fsync of their own and
// no wait under the committer's mu: when an extension is due, nextSync
// hands it to the fsync job (planZeros), which writes the zeros before
// its fdatasync (runSync), outside mu; that fdatasync makes them durable
// with the records it covers, written before it started. Meanwhile the
// committer writes nothing that reaches the zeros' start, and neither
// truncates nor closes the file, before they are written (awaitZeros):
// a group written while the fsync runs (a WaitWritten caller's) would
// otherwise be overwritten by them.
//
// Under SyncNever and SyncInterval the tail is written by appending
// alone: no fsync waits there, and the zeros' write and fdatasync cost
// more than they save an fsync per interval: with them SyncInterval ran
// at a median 0.80 of SyncNever in the same runs, without them at 0.95
// (bench/results/extender-offpath-2026-12-05.txt).
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
//     syncRolled); the new tail is extended by the next fsync job;
//   - Close cuts them before its last fsync; so does the store before it
//     reopens tidwall/wal (reopenFront).
//
// A write, fdatasync or truncate of the extender that fails poisons the
// Log, as every failed write does, with one exception: a write of zeros
// that finds the disk full (ENOSPC, EDQUOT) is taken back (the file cut
// to where the zeros began, freeing what they took) and the records are
// fsynced without them. The zeros hold no record, and a disk too full for
// a megabyte of them may still hold the next records: a queue that
// filled its disk drains once a little space is freed, instead of
// refusing every write until the zeros fit. That tail then appends alone
// until it rolls (extender.full): zeros tried again at every fsync would
// each time take all the space left, which a compaction's snapshot or
// another program may be writing into, only to be cut back. The next tail
// tries again. A record's own write that finds the disk full fails and
// poisons the Log.

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
	f       File       // the tail file, opened for writing through the Log's FS; nil until the first extension, and after a roll
	path    string     // f's path
	end     int64      // the file's size once pending is written: zeros from the written end (committer.tailBytes) to here when end > tailBytes
	pending *zeroWrite // SyncAlways: zeros an fsync job writes, not yet known written; nil when none
	full    bool       // a write of zeros into f found the disk full: f takes no more until the next tail
}

// zeroWrite is zeros, from from to to, that an fsync job writes into the
// tail before its fdatasync (runSync), outside the committer's mu. Until
// done is closed the committer writes nothing at or past from, and
// neither truncates nor closes the file (awaitZeros): the zeros would
// land on its entries, or past a cut.
type zeroWrite struct {
	f        File          // the extender's file
	path     string        // its path, for errors
	from, to int64         // the zeros' offsets
	done     chan struct{} // closed once they are written, or failed
	err      error         // the write's outcome; read after done is closed
	full     bool          // the disk was full: none written, the file cut back to from; read after done is closed
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

// extension returns the offsets of the zeros the tail needs now, from
// from to target, or target 0 when it needs none, opening the tail for
// writing first if it is a new one. Only under SyncAlways (see above).
func (c *committer) extension() (from, target int64, err error) {
	if c.l.opts.AppendOnly || c.l.opts.Sync != SyncAlways {
		return 0, 0, nil
	}
	x := &c.ext
	if x.f != nil && x.path != c.tail.path {
		if err := c.releaseExtender(); err != nil {
			return 0, 0, err
		}
	}
	if x.f != nil && x.full {
		return 0, 0, nil // this tail appends alone (see above)
	}
	from = max(x.end, c.tailBytes)
	if x.f == nil {
		from = c.tailBytes // a new tail holds no zeros
	}
	target = extendTarget(c.tailBytes, from, c.l.opts.SegmentSize)
	if target == 0 {
		return 0, 0, nil
	}
	if x.f == nil {
		f, err := c.l.opts.FS.OpenFile(c.tail.path, os.O_WRONLY, 0)
		if err != nil {
			return 0, 0, fmt.Errorf("wal: open %s to extend it, log poisoned: %w", c.tail.path, err)
		}
		x.f, x.path, x.end = f, c.tail.path, c.tailBytes
	}
	return from, target, nil
}

// planZeros returns the zeros the next fsync job writes ahead of the
// tail (SyncAlways), or nil when it needs none: its fdatasync then makes
// them durable with the records, and no caller waits for an fsync of
// zeros alone, nor for their write under mu. The extender counts them
// from now on; awaitZeros fences them.
func (c *committer) planZeros() (*zeroWrite, error) {
	from, target, err := c.extension()
	if err != nil || target == 0 {
		return nil, err
	}
	z := &zeroWrite{f: c.ext.f, path: c.ext.path, from: from, to: target, done: make(chan struct{})}
	c.ext.end, c.ext.pending = target, z
	return z, nil
}

// write writes the zeros and marks them done; it runs outside mu.
func (z *zeroWrite) write() error {
	z.err = writeZeros(z.f, z.path, z.from, z.to)
	if z.err != nil && diskFull(z.err) {
		// Take back the part written, which may hold the space the next
		// records need; the committer writes nothing at or past from
		// before done is closed.
		if err := z.f.Truncate(z.from); err != nil {
			z.err = errors.Join(z.err, fmt.Errorf("wal: cut %s back to %d bytes: %w", z.path, z.from, err))
		} else {
			z.err, z.full = nil, true
		}
	}
	close(z.done)
	return z.err
}

// diskFull reports whether err says the disk (or the user's quota) is
// full.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// landed takes back a zeroWrite that is done: when the disk was full, the
// file ends where the zeros would have begun, and takes no more zeros.
func (c *committer) landed(z *zeroWrite) {
	if z.full && c.ext.f == z.f {
		c.ext.end, c.ext.full = z.from, true
	}
}

// awaitZeros waits until the zeros handed to an fsync job are written,
// and returns the write's error (the job poisoned the log with it). The
// committer calls it before it writes at or past their start, truncates
// or closes the tail file.
func (c *committer) awaitZeros() error {
	z := c.ext.pending
	if z == nil {
		return nil
	}
	<-z.done
	c.ext.pending = nil
	c.landed(z)
	return z.err
}

// crossesZeros reports whether the batch planned (plan: the tail's size
// after it, and the rolls it makes) reaches zeros not yet written.
func (c *committer) crossesZeros(plan rollPlan) bool {
	z := c.ext.pending
	return z != nil && (len(plan.starts) > 0 || plan.tail > z.from)
}

// writeZeros writes zeros into f from offset from to offset to.
func writeZeros(f File, path string, from, to int64) error {
	for off := from; off < to; {
		n := min(to-off, int64(len(zeroPiece)))
		if _, err := f.WriteAt(zeroPiece[:n], off); err != nil {
			return fmt.Errorf("wal: extend %s to %d bytes failed, log poisoned: %w", path, to, err)
		}
		off += n
	}
	return nil
}

// cutZeros truncates the extended tail file to size, its written end,
// when zeros follow it, and reports whether it did. The caller fsyncs the
// file.
func (c *committer) cutZeros(size int64) (bool, error) {
	if err := c.awaitZeros(); err != nil {
		return false, err
	}
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

// releaseExtender closes the extender's file, once zeros in flight are
// written. It returns the failure of their write, if any, beside that of
// the close: the file is closed all the same.
func (c *committer) releaseExtender() error {
	werr := c.awaitZeros()
	x := &c.ext
	if x.f == nil {
		return werr
	}
	err, path := x.f.Close(), x.path
	x.f, x.path, x.end, x.full = nil, "", 0, false
	if err != nil {
		err = fmt.Errorf("wal: close %s: %w", path, err)
	}
	return errors.Join(werr, err)
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
