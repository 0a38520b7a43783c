package queue

import (
	"errors"

	"github.com/walq/walq/wal"
)

// A reader takes where a live message's or value's record is from the
// index under q.mu, and reads it outside the lock. Meanwhile a compaction
// may copy the record forward, point the index at the copy and cut the
// log behind it: the read then fails with wal.ErrNotFound though the
// message is live. follow reads it again where the index has it now, for
// as long as the index moves it on. Each retry makes progress: a copy
// forward is appended after the record it copies, so each location read
// is later than the one before, and the read before failed only because
// a compaction cut the log past it. The reads stop at the first that
// finds the record, or once the index no longer holds it (acked, purged,
// requeued: gone) or still names the location that failed (a record lost
// to damage a salvage skipped).

// follow calls read with loc, where the index had the record. While read
// fails with wal.ErrNotFound, it asks where for the record's location in
// the index now, and calls read again there if the index holds it (ok)
// at a later location; otherwise it returns read's error.
func (q *Queue) follow(loc uint64, read func(loc uint64) error, where func() (uint64, bool)) error {
	for {
		q.beforeRead()
		err := read(loc)
		if err == nil || !errors.Is(err, wal.ErrNotFound) {
			return err
		}
		next, ok := where()
		if !ok || next <= loc {
			return err
		}
		loc = next
	}
}

// beforeRead calls the reading hook, if set.
func (q *Queue) beforeRead() {
	if q.reading != nil {
		q.reading()
	}
}
