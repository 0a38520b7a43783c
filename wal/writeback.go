package wal

import (
	"fmt"
	"sync/atomic"
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

// writebackBytes is how many bytes written to the tail segment, since the
// last hint, make the committer hint again.
const writebackBytes = 512 << 10

// hint is a range of a segment file to write back; its file is pinned
// until the hint is made.
type hint struct {
	file   *segFile
	path   string
	off, n int64
}

// hints is the committer's side of the write-back goroutine.
type hints struct {
	jobs        chan hint     // capacity 1; closed at shutdown
	exited      chan struct{} // closed when the goroutine returns
	unsupported atomic.Bool   // the file system refused a hint as unsupported

	// bytes of the tail handed over so far (0 again at each roll: publish);
	// read and written by the committer, under committer.mu
	bytes int64
}

// writeback hands the tail's bytes written since the last hint, once they
// reach writebackBytes (commit's test), to the write-back goroutine,
// unless the last hint is still running. Under SyncAlways every write is
// fsynced at once, and on a platform without hints nothing is hinted: no
// goroutine runs (jobs is nil).
func (c *committer) writeback() {
	h := &c.hints
	if h.jobs == nil || h.unsupported.Load() {
		h.bytes = c.tailBytes
		return
	}
	n := c.tailBytes - h.bytes
	c.l.seg.RLock() // pin's rule; the committer alone drops a listed file
	file := c.tail.file.pin()
	c.l.seg.RUnlock()
	select {
	case h.jobs <- hint{file: file, path: c.tail.path, off: h.bytes, n: n}:
		h.bytes = c.tailBytes
	default: // the last hint still runs: this range goes with the next
		_ = file.release() // read-only handle, still listed: closes nothing
	}
}

// hinter is the write-back goroutine: it makes the hints it is handed
// until jobs is closed.
func (c *committer) hinter(jobs <-chan hint, exited chan<- struct{}) {
	defer close(exited)
	for h := range jobs {
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

// stopHinter stops the write-back goroutine and waits for it.
func (c *committer) stopHinter() {
	if c.hints.jobs != nil {
		close(c.hints.jobs)
		<-c.hints.exited
	}
}
