package wal

import (
	"fmt"
	"sort"
)

// TruncateFront removes every whole segment all of whose records are below
// lsn. The tail segment, and the last segment holding records, are never
// removed, so a log that holds records keeps some. FirstLSN advances to the
// first LSN of the first segment kept. It returns nil if nothing is
// removed. The removal is durable, and so is the first segment kept: when
// its records are not yet (the tail under SyncNever or SyncInterval), it
// is fsynced first, so that a power loss never leaves a log of no record.
// A failed fsync, store call, unlink or directory fsync poisons the Log; on a
// poisoned Log it returns the poison and removes nothing.
//
// The committer goroutine (it owns the store) chooses the segments and
// forgets them in the store, so that part waits for the groups being
// written; the caller then removes the files and fsyncs the directory
// itself, while other callers keep writing (and rolling) meanwhile. One
// truncation runs at a time, and Close waits for a running one. Readers
// positioned in a removed segment finish reading it from their open
// handle; Readers and Reads that start below the new FirstLSN, once
// TruncateFront has returned, get ErrNotFound.
func (l *Log) TruncateFront(lsn LSN) error {
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	l.truncating.Lock()
	defer l.truncating.Unlock()
	var cut frontCut
	if err := l.request(request{truncate: true, lsn: lsn, cut: &cut}); err != nil || cut.remove == nil {
		return err
	}
	if err := cut.remove(); err != nil {
		return l.poison(truncateErr(cut.index, cut.lsn, err))
	}
	l.dropFront(cut.drop)
	return nil
}

// frontCut is what is left of a truncation once the committer has served
// it: the removal of the files, which TruncateFront runs without the
// committer's mutex, then the first drop segments leave Log.seg.
type frontCut struct {
	remove func() error // nil when nothing is left to do
	index  uint64       // tidwall/wal index of the first segment kept
	lsn    LSN          // its first LSN
	drop   int          // segments removed
}

// truncateErr is the error that poisons the Log when a truncation fails.
func truncateErr(index uint64, lsn LSN, err error) error {
	return fmt.Errorf("wal: truncate front at index %d (LSN %d) failed, log poisoned: %w", index, lsn, err)
}

// request hands a request to the committer and waits for its outcome.
func (l *Log) request(req request) error {
	req.done = make(chan error, 1)
	select {
	case l.reqs <- req:
	case <-l.exited:
		return ErrClosed
	}
	return <-req.done
}

// truncateFront runs on the committer goroutine. It leaves the removal of
// the files, when the store defers it, in cut.
func (c *committer) truncateFront(lsn LSN, cut *frontCut) error {
	if err := c.l.Err(); err != nil {
		return err
	}
	target, i := c.l.truncateTarget(lsn)
	if i == 0 {
		return nil
	}
	// The removal is durable: a power loss after it must still find the
	// first segment kept holding a record. Sealed segments were fsynced
	// when sealed; the tail's records may not be yet (SyncNever,
	// SyncInterval, or a flush's witness), so fsync it first, before the
	// removal begins.
	if c.l.durableLSN.Load() < target.firstLSN {
		if err := c.syncIfDirty(); err != nil {
			return err
		}
	}
	// The store forgets every segment before target; the removal of their
	// files (tidwall.go, removeFront) fsyncs the directory, and target
	// itself is not rewritten. The store may reuse the storage of its copy
	// of the tail (when it reopens tidwall/wal, reopenFront): readers stop
	// reading it first.
	c.unpublishTail()
	remove, err := c.st.truncateFront(target.firstIndex)
	if err != nil {
		return c.l.poison(truncateErr(target.firstIndex, target.firstLSN, err))
	}
	if remove == nil {
		c.l.dropFront(i)
		return nil
	}
	*cut = frontCut{remove: remove, index: target.firstIndex, lsn: target.firstLSN, drop: i}
	return nil
}

// truncateTarget returns the first segment to keep for TruncateFront(lsn)
// and its position: the last segment starting at or below lsn, but no
// later than the last segment that holds records.
func (l *Log) truncateTarget(lsn LSN) (*segment, int) {
	l.seg.RLock()
	defer l.seg.RUnlock()
	list := l.seg.list
	last := len(list) - 1
	for last > 0 && list[last].size == 0 {
		last--
	}
	i := sort.Search(last+1, func(i int) bool { return list[i].firstLSN > lsn }) - 1
	if i <= 0 {
		return nil, 0
	}
	return list[i], i
}

// dropFront removes the first i segments from the list. Handles are
// closed once no reader pins them; the list's own references are released
// after Log.seg is let go: the last close of a removed file frees its
// cached pages in the kernel (about a millisecond for a 4 MiB segment),
// and under the lock every write's publish and every Reader would wait
// for it.
func (l *Log) dropFront(i int) {
	l.seg.Lock()
	list := l.seg.list
	files := make([]*segFile, 0, i)
	for _, s := range list[:i] {
		if f := s.detach(); f != nil {
			files = append(files, f)
		}
	}
	l.seg.list = append([]*segment(nil), list[i:]...)
	l.firstLSN.Store(list[i].firstLSN)
	l.seg.Unlock()
	for _, f := range files {
		_ = f.release() // read-only handle: a close error loses nothing
	}
}
