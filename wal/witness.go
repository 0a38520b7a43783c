package wal

import (
	"fmt"
	"time"
)

// An entry's Synced LSN names the records an fsync had made durable before
// the entry's write began. The records of the last entries before a pause
// are named by nothing, though: Flush, the ticks of SyncInterval and, under
// SyncAlways, the fsync of the last group before an idle spell make them
// durable after every entry was written, and the next entry, which would
// carry the new DurableLSN, may not come for a long time. The tear rule
// (repair.go) then cannot tell a bit flip in them from a torn write.
//
// So once an fsync has made every record written durable, DurableLSN is
// above the highest Synced LSN of any entry written, and no group waits to
// be written (it would carry DurableLSN itself), the committer writes a
// witness: a version-2 entry with Count 0 (entry.go), First LSN the next
// record's, Synced LSN DurableLSN. It holds no record and takes no LSN, so
// readers pass over it; only the repair reads its Synced LSN. When it is
// written:
//
//   - Flush: before it returns, after its fsync;
//   - SyncInterval: at once after an fsync of a tick; after an fsync made
//     by a write (the interval had passed), witnessIdle later;
//   - SyncAlways: witnessIdle after the last fsync, if no group was written
//     since: a caller that appends again at once (a steady lone caller, or
//     many) names the records by its own entry, and no witness is written
//     (while the log stays busy the timer looks less and less often, up
//     to witnessBusy: see there);
//   - SyncNever: only by Flush. Close writes none: a closed log ends at its
//     last entry, which the repair's shape test requires of a tear, so
//     damage before it followed by a valid entry is refused anyway.
//
// None is written where it would roll the segment (a witness is never the
// last entry of a sealed segment), nor while an fsync is in flight. One is
// written into the empty tail a roll leaves: the roll fsynced the sealed
// segment, and only an entry after the sealed segment's last one says so;
// without one, damage to that entry under an empty tail is what a torn
// roll leaves, and is cut (tornroll.go). So a segment can start with a
// witness. Two witnesses are never adjacent: the second needs DurableLSN
// to rise, which needs a record written and fsynced.
//
// The witness is not fsynced with its write: it reaches the disk by the
// next fsync (under SyncInterval the next tick, which it arms; a second
// Flush, Close, or the next group's) or the kernel's write-back; it makes
// the log dirty so that Close fsyncs it. Until it is
// on the disk it protects nothing; a power loss meanwhile loses it or
// tears it, as it can any write: its records were durable before it was
// written, so neither can cut them, and a torn witness at the end of the
// file is cut as a torn tail.

// A writable Open fsyncs every record it finds, those a process crash
// left unsynced included, so DurableLSN starts at WrittenLSN; but no entry
// says so unless the log's last entry is a witness of them. Open then
// arms the witness timer as an fsync does: left idle for witnessIdle, the
// log writes a witness (into an empty tail too, naming the sealed
// segment's records); a caller that appends at once names them by its own
// entry instead.

// openNamed returns what the log's last entry names durable, for a
// writable Open: a witness is due when DurableLSN is above it. The tail's
// last entry's Synced LSN (0 for version 1); 0 when the tail is empty
// and a sealed segment, ending with records, is before it; DurableLSN
// when the log holds no entry.
func (l *Log) openNamed(tail *segment) (LSN, error) {
	d := l.durableLSN.Load()
	if tail.entries == 0 || len(tail.points) == 0 {
		if len(l.seg.list) > 1 || tail.entries > 0 {
			return 0, nil
		}
		return d, nil
	}
	r := &segReader{f: tail.file.f, ahead: 2 * indexSpacing} // the last point is about indexSpacing from the end
	off := tail.points[len(tail.points)-1].off
	h := entryHeader{}
	for off < tail.size {
		n, eh, err := r.header(off, tail.size)
		if err != nil {
			return 0, fmt.Errorf("wal: read %s: %w", tail.loc(off, 0), err)
		}
		off, h = off+n, eh
	}
	if h.synced == syncedUnknown {
		return 0, nil
	}
	return min(h.synced, d), nil
}

// witnessIdle is how long the committer waits after an fsync, under
// SyncAlways and after a write's fsync under SyncInterval, before it
// writes a witness: long enough that a caller that appends again at once
// names the records itself.
const witnessIdle = 2 * time.Millisecond

// witnessBusy bounds the witness timer's delay while the log stays busy.
// Each time the timer finds records written since it was armed, it doubles
// its delay, from witnessIdle up to witnessBusy, and arms itself again;
// while it is armed, an fsync does not arm it. So a log under steady load
// (a lone caller under SyncAlways fsyncs about every half millisecond)
// wakes the runtime for the timer a few times in witnessBusy, not once per
// fsync. A witness follows the end of the load within twice witnessBusy:
// the first firing after the last write still finds it (it came after the
// timer was armed) and arms the timer for witnessBusy again; only the
// next one finds the log idle. The witness protects nothing until it reaches the disk, at
// the next fsync or the kernel's write-back (seconds later), so the delay
// widens no window that matters.
const witnessBusy = 64 * time.Millisecond

// armWitness makes the committer consider a witness witnessIdle from now,
// unless that is already planned or nothing needs one; c.mu is held.
func (c *committer) armWitness() {
	if c.stopped || c.l.durableLSN.Load() <= c.named.Load() {
		return
	}
	c.rearmWitness(witnessIdle)
}

// rearmWitness arms the witness timer to fire after d unless it is armed.
func (c *committer) rearmWitness(d time.Duration) {
	if c.witnessOn.CompareAndSwap(false, true) {
		c.witnessFrom.Store(c.l.writtenLSN.Load())
		c.witnessTimer.Reset(d)
	}
}

// witnessDue handles the witness timer on the committer's goroutine: it
// writes a witness if the log stayed idle since the last fsync for
// witnessIdle, and looks again later if an fsync ended since. It takes
// c.mu only when a witness may be due, and never waits for it: a caller
// that finds c.mu free after its own fsync writes its next group itself
// (syncedOwn), and a tick that held it would hand that work to this
// goroutine.
func (c *committer) witnessDue() {
	c.witnessOn.Store(false)
	if c.l.writtenLSN.Load() != c.witnessFrom.Load() { // busy: look again later, not at the next fsync
		c.witnessWait = min(max(2*c.witnessWait, 2*witnessIdle), witnessBusy)
		c.rearmWitness(c.witnessWait)
		return
	}
	c.witnessWait = 0
	if c.l.durableLSN.Load() <= c.named.Load() {
		return // an entry written since carries DurableLSN
	}
	if c.syncing.Load() {
		return // the fsync in flight arms the timer again when it ends (synced)
	}
	if !c.mu.TryLock() {
		c.rearmWitness(witnessIdle) // busy: not idle
		return
	}
	defer c.mu.Unlock()
	if c.stopped || c.inflight != nil {
		return // an fsync started meanwhile: see above
	}
	if wait := witnessIdle - time.Since(c.lastSync); wait > 0 {
		c.rearmWitness(wait)
		return
	}
	_ = c.witness() // a failure poisons the Log
}

// witness writes a witness if one is due (see above); c.mu is held. A
// failed write poisons the Log and is returned.
func (c *committer) witness() error {
	l := c.l
	d := l.durableLSN.Load()
	if c.stopped || d <= c.named.Load() || d != l.writtenLSN.Load() || c.inflight != nil ||
		l.poisoned.Load() || l.queued() {
		return nil
	}
	e := encodeEntry(d+1, d, nil)
	frame := frameSize(len(e))
	plan := planRolls(c.tailBytes, l.opts.SegmentSize, []int64{frame})
	if len(plan.starts) > 0 {
		return nil // it would seal the segment: see above
	}
	c.batch.clear()
	c.batch.add(c.nextIndex, e)
	c.batch.witness = true
	err := c.f.writeBatch(c.st, &c.batch)
	c.batch.witness = false
	if err != nil {
		return l.poison(fmt.Errorf("wal: write of a witness of LSN %d failed, log poisoned: %w", d, err))
	}
	h := entryHeader{first: d + 1, synced: d, version: entryVersion2}
	l.seg.Lock()
	s := c.tail
	s.addEntry(h, plan.offs[0], frame)
	s.mem = nil
	if b := c.st.tailBytes(); int64(len(b)) == plan.tail && plan.tail == s.size {
		s.mem = b[:len(b):len(b)]
	}
	l.seg.Unlock()
	c.tailBytes = plan.tail
	c.nextIndex++
	c.named.Store(d)
	c.dirty = true
	if l.opts.Sync == SyncInterval && !c.timerOn { // the next tick fsyncs it
		c.timer.Reset(l.opts.SyncInterval)
		c.timerOn = true
	}
	return nil
}

// queued reports whether a group waits to be written.
func (l *Log) queued() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.open != nil || len(l.mu.sealed) > 0
}
