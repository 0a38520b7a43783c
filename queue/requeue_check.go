package queue

import (
	"errors"
	"fmt"
	"strings"

	"github.com/walq/walq/index"
	"github.com/walq/walq/wal"
)

// A requeue makes a dead letter or value deliverable again; one whose
// payload cannot be read would only fail again at each delivery, so a
// requeue first checks it as a delivery would read it: the log entry that
// holds it passes its CRC, and the record there is the letter's (its
// enqueue or publish, or a copy forward of it). The check does not copy
// the payload out of the entry.
//
// Only damage (ErrCorrupt) makes a letter unreadable. A letter purged,
// or requeued and settled, while it is checked may be compacted out of
// the log before the check reads it: the check then finds it gone (not
// in the index, or no longer dead), and the requeue treats it as if it had
// been gone before the call (RequeueAllDead leaves it out, RequeueDead
// fails with ErrNotFound). A check that fails otherwise (the queue closed
// meanwhile, an I/O error) says nothing of the letter: the requeue fails
// with that error, ErrClosed once closed, and never advises to purge it.

// maxNamedDamage is how many of the dead letters or values it left for
// damage a RequeueAllDead names; it counts the rest.
const maxNamedDamage = 10

// errDeadGone is the error of the check of a dead letter or value that
// is gone from the log and no longer dead: purged, or requeued, while it
// was checked. A requeue never returns it.
var errDeadGone = errors.New("queue: dead letter or value gone")

// checkDeadReadable checks the payload of the dead letter d, which a
// requeue is about to make deliverable, and fails if it cannot be read,
// or with ErrNotFound if d is gone meanwhile.
func (q *Queue) checkDeadReadable(d deadRef) error {
	err := q.checkDeadPayload(d)
	if errors.Is(err, errDeadGone) {
		return q.noDeadLetter(d.id)
	}
	return q.refusal(d.name(), err)
}

// checkDeadPayload checks the payload of the dead letter d and returns
// the read's error as it is, or errDeadGone. A compaction may copy the
// letter forward and cut the log behind it meanwhile: the check then
// follows the copy.
func (q *Queue) checkDeadPayload(d deadRef) error {
	err := q.followMoves(d.seq, d.loc, func(loc uint64) error {
		return q.viewRecord(loc, func(r record) error { return checkPayloadRecord(&r, d.seq, loc) })
	})
	if errors.Is(err, wal.ErrNotFound) && !q.isDead(d.seq) {
		return errDeadGone
	}
	return err
}

// isDead reports whether the message seq is a dead letter now.
func (q *Queue) isDead(seq uint64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.mu.st.table.Get(seq)
	return ok && e.State == index.Dead
}

// checkDeadValueReadable is checkDeadReadable of the dead value d.
func (q *Queue) checkDeadValueReadable(d index.DeadValue) error {
	err := q.checkDeadValuePayload(d)
	if errors.Is(err, errDeadGone) {
		return q.noDeadValue(d.Seq)
	}
	return q.refusal(deadValueName(d), err)
}

// checkDeadValuePayload is checkDeadPayload of the dead value d: it
// follows the copies forward as the index shows them (follow).
func (q *Queue) checkDeadValuePayload(d index.DeadValue) error {
	gone := false
	err := q.follow(d.Loc, func(uint64) error {
		return q.viewRecord(d.Loc, func(r record) error { return checkValueRecord(&r, d.SortedValue) })
	}, func() (uint64, bool) {
		cur, ok := q.deadValue(d.Seq)
		d, gone = advanced(d, cur, ok), !ok
		return cur.Loc, ok
	})
	if gone {
		return errDeadGone
	}
	return err
}

// advanced returns cur, the value d as the index holds it now (ok), if
// the index moved it on to a later location; d otherwise.
func advanced(d, cur index.DeadValue, ok bool) index.DeadValue {
	if ok && cur.Loc > d.Loc {
		return cur
	}
	return d
}

func (d deadRef) name() string { return fmt.Sprintf("dead letter %q (seq %d)", d.id, d.seq) }

func deadValueName(d index.DeadValue) string {
	return fmt.Sprintf("dead value %d (key %q)", d.Seq, d.Key)
}

// refusal is the error of a requeue of what whose check failed with err
// (nil when err is): ErrClosed once the queue is closed; for damage, a
// refusal that says the letter cannot be read and what to do; otherwise
// err, naming what.
func (q *Queue) refusal(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case q.isClosed():
		return ErrClosed
	case errors.Is(err, ErrCorrupt):
		return fmt.Errorf("queue: %s not requeued, its payload cannot be read (purge it, or repair the directory first): %w", what, err)
	}
	return fmt.Errorf("queue: %s not requeued: %w", what, err)
}

// damage collects the dead letters or values a RequeueAllDead left
// because they cannot be read.
type damage struct {
	kind  string   // "dead letter" or "dead value"
	names []string // the first maxNamedDamage of them, each with its error
	errs  []error  // the error of each of them, ErrCorrupt
}

// add records that the letter what cannot be read, with err.
func (d *damage) add(what string, err error) {
	if len(d.names) < maxNamedDamage {
		d.names = append(d.names, what+": "+withoutWayOut(err))
	}
	d.errs = append(d.errs, err)
}

// err returns the error of the letters left, nil if none: it names the
// first of them and counts the rest, and says the way out once.
func (d *damage) err() error {
	if len(d.errs) == 0 {
		return nil
	}
	return &damageError{d: *d}
}

// damageError is the error of a RequeueAllDead that left letters it could
// not read; it wraps each one's error (ErrCorrupt).
type damageError struct{ d damage }

func (e *damageError) Error() string {
	var b strings.Builder
	n, kind := len(e.d.errs), e.d.kind
	if n > 1 {
		kind += "s"
	}
	fmt.Fprintf(&b, "queue: %d %s not requeued, as the payload cannot be read (purge, or repair the directory first): %s",
		n, kind, strings.Join(e.d.names, "; "))
	if more := len(e.d.errs) - len(e.d.names); more > 0 {
		fmt.Fprintf(&b, "; and %d more", more)
	}
	b.WriteString("; " + wayOut)
	return b.String()
}

func (e *damageError) Unwrap() []error { return e.d.errs }
