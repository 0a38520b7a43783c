package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"sync/atomic"
	"syscall"
)

// Under SyncNever and SyncInterval the tail segment's pages stay dirty
// until an fsync: at the segment's roll that fsync (tidwall/wal's, then
// walq's) writes the whole segment, MiBs, while the caller whose write
// rolled it waits. So every writebackBytes written to the tail, the
// committer hands the range to the write-back goroutine, which asks the
// kernel to start writing it back (sync_file_range(2) with
// SYNC_FILE_RANGE_WRITE on Linux, as RocksDB's bytes_per_sync does):
// the disk writes while callers append, and the fsync at the roll finds
// little left to write. The hint runs off the callers' path because it
// blocks while the kernel queues the pages. A hint still running when the
// next one is due is not waited for: the next range starts where the last
// one handed over ended.
//
// It is a hint and nothing more: it makes no byte durable later than
// before, and durability is still counted from the fsyncs alone. A
// platform without it (writebackHints false: writeback_other.go) runs no
// write-back goroutine; a File without it (another FS) is not hinted; a file system
// that refuses the hint as unsupported is not hinted again; a shortage
// (ENOMEM, EAGAIN) skips that hint alone; any other failure poisons the
// Log, as the fsync after it would fail.
//
// A quarter of a segment before its roll (flushAt), the committer hands
// the goroutine a flush instead of a hint: an fdatasync of the tail, so
// that the fsync at the roll waits for the last quarter alone, not for
// the pages the earlier hints only queued (1 KiB records under SyncNever,
// one producer: 12-19 % less time per enqueue; a flush 1/8, 1/4, 3/8 and
// 1/2 of a 4 MiB segment before the roll was measured, a quarter was
// best: bench/results/flush-pairs-2026-12-05.txt). The flush goes
// through a handle of its own, opened for it: since Linux 4.13 an fsync
// reports a write-back error once to each open file description, and
// were it made on the handle the committer fsyncs
// (segment.file), a failure taken by the flush could let the committer's
// next fsync of that handle succeed and count lost records durable before
// the flush's poison lands. Before 4.13 the kernel keeps the error per
// file and the first fsync through any handle takes it, the flush's too:
// so the committer, after each fsync of its own (sync, syncRolled) and
// before it counts that fsync's records durable, waits for the flush in
// flight (awaitFlush), which poisons the Log before it ends, and checks
// the sticky error. A flush counts nothing durable either. Like a hint, it is
// made only for a tail whose File can be hinted (flushable: the real file
// system's), not for another FS's. A segment removed before its flush ran
// (a front truncation) is not flushed, nor is one whose handle cannot be
// opened for a shortage (EMFILE, ENFILE, ENOMEM): no fsync was made, so
// no write-back error was taken, and the fsync at the roll writes the
// pages. Any other failure poisons the Log.

// writebackBytes is how many bytes written to the tail segment, since the
// last hint, make the committer hint again.
const writebackBytes = 512 << 10

// hint is a range of a segment file to write back; its file is pinned
// until the hint is made.
type hint struct {
	file   *segFile
	path   string
	off, n int64
	flush  bool          // an fdatasync of the file (flushAt), not a hint
	done   chan struct{} // a flush's: closed once it ended, after its failure poisoned the Log
}

// hints is the committer's side of the write-back goroutine.
type hints struct {
	jobs        chan hint     // capacity 1; closed at shutdown
	exited      chan struct{} // closed when the goroutine returns
	unsupported atomic.Bool   // the file system refused a hint as unsupported

	// bytes of the tail handed over so far, and whether its flush was
	// (0 and false again at each roll: publish); read and written by the
	// committer, under committer.mu
	bytes   int64
	flushed bool
	// flushing is the done channel of the last flush handed over, nil
	// once awaited (awaitFlush); the committer's, under committer.mu
	flushing chan struct{}
}

// hintDue reports whether the tail's bytes call for a hint or its flush
// (commit's test).
func (c *committer) hintDue() bool {
	h := &c.hints
	return c.tailBytes-h.bytes >= writebackBytes || (!h.flushed && c.tailBytes >= c.flushAt())
}

// flushAt is the tail's size at which it is flushed: a quarter of a
// segment before the roll.
func (c *committer) flushAt() int64 {
	return c.l.opts.SegmentSize - c.l.opts.SegmentSize/4
}

// writeback hands the tail's bytes written since the last hint, once they
// reach writebackBytes, or its flush once the tail reaches flushAt
// (hintDue), to the write-back goroutine, unless the last job is still
// running. Under SyncAlways every write is fsynced at once, and on a
// platform without hints nothing is hinted or flushed: no goroutine runs
// (jobs is nil).
func (c *committer) writeback() {
	h := &c.hints
	flush := !h.flushed && c.tailBytes >= c.flushAt()
	if flush && (h.jobs == nil || !flushable(c.tail.file.f)) {
		h.flushed, flush = true, false // no goroutine, or a File of another FS: no flush
	}
	if h.jobs == nil || (!flush && h.unsupported.Load()) {
		h.bytes = c.tailBytes
		return
	}
	if !flush && c.tailBytes-h.bytes < writebackBytes {
		return // the flush was due and is not made; no hint is due
	}
	n := c.tailBytes - h.bytes
	var done chan struct{}
	if flush {
		done = make(chan struct{})
	}
	c.l.seg.RLock() // pin's rule; the committer alone drops a listed file
	file := c.tail.file.pin()
	c.l.seg.RUnlock()
	select {
	case h.jobs <- hint{file: file, path: c.tail.path, off: h.bytes, n: n, flush: flush, done: done}:
		h.bytes, h.flushed = c.tailBytes, h.flushed || flush
		if flush {
			h.flushing = done
		}
	default: // the last job still runs: this one goes with the next
		_ = file.release() // read-only handle, still listed: closes nothing
	}
}

// hinter is the write-back goroutine: it makes the hints it is handed
// until jobs is closed.
func (c *committer) hinter(jobs <-chan hint, exited chan<- struct{}) {
	defer close(exited)
	for h := range jobs {
		if h.flush {
			c.flushTail(h)
			continue
		}
		if c.hints.unsupported.Load() { // a hint handed over before the refusal
			_ = h.file.release()
			continue
		}
		ok, err := c.f.writeback(h.file.f, h.off, h.n)
		_ = h.file.release() // read-only handle: a close error loses nothing
		if err != nil {
			_ = c.l.poison(fmt.Errorf("wal: write-back of %s failed, log poisoned: %w", h.path, err))
		}
		if !ok {
			c.hints.unsupported.Store(true)
		}
	}
}

// flushTail makes a flush job: an fdatasync of h's segment through a
// handle of its own (the flush func: flushSegment). A failure poisons the
// Log before done is closed (awaitFlush counts on it).
func (c *committer) flushTail(h hint) {
	defer close(h.done)
	err := c.f.flush(c.l.opts.FS, h.path)
	_ = h.file.release() // read-only handle: a close error loses nothing
	if err != nil {
		_ = c.l.poison(fmt.Errorf("wal: flush of %s failed, log poisoned: %w", h.path, err))
	}
}

// awaitFlush waits for the flush in flight, if any, and returns the
// sticky error. The committer calls it after an fsync of its own and
// before it counts that fsync's records durable: where the kernel keeps
// a write-back error per file (Linux before 4.13), a flush that failed
// may have taken the error that fsync would have returned. Only the
// committer hands flushes over, so none starts meanwhile.
func (c *committer) awaitFlush() error {
	if done := c.hints.flushing; done != nil {
		<-done
		c.hints.flushing = nil
	}
	return c.l.Err()
}

// flushSegment opens path read-only, fdatasyncs it and closes it; a file
// that is gone needs no flush, and one that cannot be opened for a
// shortage is not flushed (see above: the roll's fsync writes it).
func flushSegment(fsys FS, path string) error {
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) || isShortage(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return errors.Join(f.Datasync(), f.Close())
}

// isShortage reports whether err is a shortage of file descriptors or
// memory: a passing state of the process or the system, not of the log.
func isShortage(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOMEM)
}

// stopHinter stops the write-back goroutine and waits for it.
func (c *committer) stopHinter() {
	if c.hints.jobs != nil {
		close(c.hints.jobs)
		<-c.hints.exited
	}
}
