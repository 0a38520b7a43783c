package wal

import "sync/atomic"

// Without an fsync per write (SyncNever, SyncInterval) the pages writes
// dirty stay dirty until the fsync of a roll or of an interval, and that
// fsync, made by the caller whose write rolls the segment or ends the
// interval, waits until every one of them is on the disk: milliseconds
// for a 4 MiB segment, while that caller, and every caller behind it,
// waits. So each time the tail has grown by writebackChunk bytes, the
// committer hands the new bytes to the syncer goroutine, which asks the
// kernel to start writing them back (sync_file_range with
// SYNC_FILE_RANGE_WRITE on Linux; nothing elsewhere) and waits for
// nothing more; the fsync then finds most pages written or on their way.
//
// A hint makes nothing durable and counts for nothing: DurableLSN, and
// what a power loss keeps, follow the fsyncs alone. A hint
// covers whole writebackAlign blocks only, so that the page the next
// write fills is not under writeback (a device that needs stable pages
// would make that write wait). A caller never waits for a hint: when the
// syncer is still busy with the last one, the next write hands over the
// larger span. A failed hint ends the hints for the Log's life; the fsync
// that follows still reports whether the data reached the disk.

// writebackAlign is the block a hint's end is rounded down to: a multiple
// of every page size.
const writebackAlign = 64 << 10

// writebackChunk is how many bytes the tail grows by between two hints:
// a sixteenth of a segment, within writebackAlign and 256 KiB (at most
// a few hundred microseconds of writing for the roll's fsync to wait).
func writebackChunk(segSize int64) int64 {
	return min(max(segSize/16, writebackAlign), 256<<10)
}

// writeback is a span of a segment file handed to the syncer.
type writeback struct {
	file   *segFile // pinned for the hint; the syncer releases it
	off, n int64
}

// hinting is the committer's state of the hints.
type hinting struct {
	seg    *segment       // the segment the hints were made for; nil before the first
	done   int64          // bytes of seg handed over so far
	spans  chan writeback // to the syncer; capacity 1
	failed atomic.Bool    // a hint failed: no more; set by the syncer
	exited chan struct{}  // closed when the syncer has returned
}

// nextWriteback returns the span of the tail s, now size bytes long, to
// hand to the kernel's writeback, with its file pinned, or ok false. The
// caller (the committer, under mu) holds Log.seg.
func (c *committer) nextWriteback(s *segment, size int64) (wb writeback, ok bool) {
	h := &c.hinting
	if c.l.opts.Sync == SyncAlways || h.failed.Load() {
		return writeback{}, false
	}
	if h.seg != s {
		h.seg, h.done = s, 0
	}
	end := size / writebackAlign * writebackAlign
	if end-h.done < writebackChunk(c.l.opts.SegmentSize) {
		return writeback{}, false
	}
	return writeback{file: s.file.pin(), off: h.done, n: end - h.done}, true
}

// handOver gives wb to the syncer, unless it is busy: the span is then
// left for the next hint, which covers it too.
func (c *committer) handOver(wb writeback) {
	select {
	case c.hinting.spans <- wb:
		c.hinting.done = wb.off + wb.n
	default:
		_ = wb.file.release() // read-only handle: a close error loses nothing
	}
}

// startWriteback runs a hint on the syncer goroutine.
func (c *committer) startWriteback(wb writeback) {
	if err := c.f.writeback(wb.file.f, wb.off, wb.n); err != nil {
		c.hinting.failed.Store(true)
	}
	_ = wb.file.release() // read-only handle: a close error loses nothing
}

// dropHints releases the files of the hints the syncer did not run.
func (c *committer) dropHints() {
	for {
		select {
		case wb := <-c.hinting.spans:
			_ = wb.file.release()
		default:
			return
		}
	}
}
