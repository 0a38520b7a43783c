package queue

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/walq/walq/index"
	"github.com/walq/walq/wal"
)

// DeadLetter is a message in the dead-letter set.
type DeadLetter struct {
	ID         string            // message id
	Seq        uint64            // message sequence number
	Reason     string            // why it was dead-lettered
	Deliveries int               // deliveries it had
	EnqueuedAt time.Time         // when it was enqueued
	Payload    []byte            // the message body
	Headers    map[string]string // its headers
}

// DeadLetters returns up to max dead letters whose sequence is at least
// from, oldest first, with their payloads; max <= 0 means all of them.
// A letter whose payload cannot be read (damage, ErrCorrupt) is listed
// all the same, without payload or headers, and its reason ends with
// "; corrupt record: " and the read error, so that it can still be told
// and purged by id (RequeueDead refuses it). Another read error fails
// the call.
//
// The letters are taken from the index, a page at a time, and read
// outside the queue's lock. A letter that is no longer dead once its
// page is read (purged or requeued meanwhile, compacted out of the log
// or not) is left out, as if gone before the call; the call then reads
// on past its page, so it returns fewer than max letters only when no
// more are dead after the last one it read. A letter that leaves the
// dead-letter set after its page was read is listed as it was.
func (q *Queue) DeadLetters(from uint64, max int) ([]DeadLetter, error) {
	out := []DeadLetter{}
	for {
		want := max - len(out) // max <= 0: all
		es, err := q.viewedDeadLetters(from, want)
		if err != nil {
			return nil, err
		}
		page, err := q.deadLetterPage(es)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if max <= 0 || len(es) < want || len(out) == max {
			return out, nil
		}
		from = es[len(es)-1].Seq + 1
	}
}

// viewedDeadLetters returns up to max dead letters of the index the views
// show whose sequence is at least from; max <= 0 means all of them.
func (q *Queue) viewedDeadLetters(from uint64, max int) ([]index.Entry, error) {
	var es []index.Entry
	err := q.view(func(st *state) {
		st.table.Dead(from, func(e index.Entry) bool {
			es = append(es, e)
			return max <= 0 || len(es) < max
		})
	})
	return es, err
}

// deadLetterPage reads the payloads of the dead letters es and returns
// those still dead once it read them all (see DeadLetters).
func (q *Queue) deadLetterPage(es []index.Entry) ([]DeadLetter, error) {
	out := make([]DeadLetter, 0, len(es))
	for _, e := range es {
		d := DeadLetter{ID: e.ID, Seq: e.Seq, Reason: e.Reason, Deliveries: int(e.Deliveries),
			EnqueuedAt: time.Unix(0, e.EnqueuedAt)}
		m := &Message{Receipt: Receipt{Seq: e.Seq}}
		switch err := q.readPayload(m, e.Loc); {
		case errors.Is(err, wal.ErrNotFound) && !q.isDead(e.Seq):
			continue // purged or requeued, and compacted out of the log, meanwhile
		case errors.Is(err, ErrCorrupt):
			d.Reason += "; " + corruptReason + err.Error()
		case err != nil:
			return nil, err
		default:
			d.Payload, d.Headers = m.Payload, m.Headers
		}
		out = append(out, d)
	}
	err := q.view(func(st *state) {
		out = slices.DeleteFunc(out, func(d DeadLetter) bool {
			e, ok := st.table.Get(d.Seq)
			return !ok || e.State != index.Dead
		})
	})
	return out, err
}

// corruptReason starts what DeadLetters adds to the reason of a letter it
// cannot read; the Redis engine's listing says the same of its damaged
// letters.
const corruptReason = "corrupt record: "

// RequeueDead makes the dead letter with id ready again, with its delivery
// count reset. It checks the letter's payload first (see requeue_check.go
// for what it checks): a letter it cannot read for damage (DeadLetters
// lists it as a corrupt record) is refused with an error wrapping
// ErrCorrupt, and stays dead, as a requeued one could only fail again at
// each delivery; purge it, or repair the directory first (walq repair). A
// check that fails otherwise fails the call with its error (ErrClosed
// once the queue is closed), and the letter stays dead. A letter purged
// or requeued meanwhile is not found (ErrNotFound). On a poisoned log it
// returns the error that poisoned it, before ErrNotFound.
func (q *Queue) RequeueDead(id string) error {
	e, err := q.deadByID(id)
	if err != nil {
		return err
	}
	if err := q.checkDeadReadable(deadRef{seq: e.Seq, loc: e.Loc, id: e.ID}); err != nil {
		return err
	}
	q.mu.Lock()
	if cur, ok := q.mu.st.table.Get(e.Seq); !ok || cur.State != index.Dead || cur.ID != id {
		q.mu.Unlock()
		return q.noDeadLetter(id)
	}
	_, err = q.changeSeqsLocked(opRequeueDead, []uint64{e.Seq}, true)
	return err
}

// PurgeDead removes the dead letter with id for good. It reads no payload.
// On a poisoned log it returns the error that poisoned it, before
// ErrNotFound.
func (q *Queue) PurgeDead(id string) error {
	q.mu.Lock()
	if err := q.deadRefusedLocked(); err != nil {
		q.mu.Unlock()
		return err
	}
	e, ok := q.mu.st.table.GetByID(id)
	if !ok || e.State != index.Dead {
		q.mu.Unlock()
		return q.noDeadLetter(id)
	}
	_, err := q.changeSeqsLocked(opPurge, []uint64{e.Seq}, false)
	return err
}

// RequeueAllDead makes every dead letter whose payload it can read ready
// again and returns how many. The letters it cannot read for damage stay
// dead (see RequeueDead): it requeues the others, and returns their count
// with an error wrapping ErrCorrupt that names the letters it left (the
// first few, and how many more). A letter purged or requeued while it
// checks the letters is left out, as if gone before the call. A check
// that fails otherwise fails the call before it requeues anything. On a
// poisoned log it returns the error that poisoned it.
//
// It also takes the letters that a SettleAsync dead-lettered whose
// Pending has not completed: a letter is dead from the moment that call
// returns, durable or not. Their records come first in the log, so the
// commit RequeueAllDead waits for covers them too, and once it returns
// the message is ready after a restart; a crash before that may undo the
// dead-letter (see SettleAsync) as well as the requeue.
func (q *Queue) RequeueAllDead() (int, error) {
	ds, err := q.deadRefs()
	if err != nil {
		return 0, err
	}
	ready := make([]uint64, 0, len(ds))
	left := damage{kind: "dead letter"}
	for _, d := range ds {
		switch err := q.checkDeadPayload(d); {
		case err == nil:
			ready = append(ready, d.seq)
		case errors.Is(err, errDeadGone): // purged or requeued meanwhile
		case errors.Is(err, ErrCorrupt):
			left.add(d.name(), err)
		default:
			return 0, q.refusal(d.name(), err)
		}
	}
	q.mu.Lock()
	if err := q.deadRefusedLocked(); err != nil {
		q.mu.Unlock()
		return 0, err
	}
	ready = slices.DeleteFunc(ready, func(seq uint64) bool { // requeued or purged meanwhile
		e, ok := q.mu.st.table.Get(seq)
		return !ok || e.State != index.Dead
	})
	n, err := q.changeSeqsLocked(opRequeueDead, ready, true)
	return n, joinErrors(err, left.err())
}

// PurgeAllDead removes every dead letter and returns how many.
// It reads no payload. On a closed queue it fails with ErrClosed, on a
// poisoned log with the error that poisoned it.
func (q *Queue) PurgeAllDead() (int, error) {
	q.mu.Lock()
	if err := q.deadRefusedLocked(); err != nil {
		q.mu.Unlock()
		return 0, err
	}
	var seqs []uint64
	q.mu.st.table.Dead(0, func(e index.Entry) bool {
		seqs = append(seqs, e.Seq)
		return true
	})
	return q.changeSeqsLocked(opPurge, seqs, false)
}

// deadByID returns the dead letter with id as the index holds it now.
func (q *Queue) deadByID(id string) (index.Entry, error) {
	q.mu.Lock()
	e, ok := q.mu.st.table.GetByID(id)
	refused := q.deadRefusedLocked()
	q.mu.Unlock()
	if refused != nil {
		return index.Entry{}, refused
	}
	if !ok || e.State != index.Dead {
		return index.Entry{}, q.noDeadLetter(id)
	}
	return e, nil
}

// noDeadLetter is the error of a change of the dead letter id that is not
// there: deadRefusedLocked's, else ErrNotFound.
func (q *Queue) noDeadLetter(id string) error {
	q.mu.Lock()
	err := q.deadRefusedLocked()
	q.mu.Unlock()
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: no dead letter %q", ErrNotFound, id)
}

// deadRefusedLocked says why no dead letter or value can be changed now:
// ErrClosed once the queue is closed, the error that poisoned the log
// once it is, else nil. On a poisoned log the state may count a change
// whose write failed, which no file holds (a requeue, a purge), so it no
// longer tells whether a letter is dead: ErrNotFound, or (0, nil) from a
// call on them all, would read as if the log were healthy. q.mu is held.
func (q *Queue) deadRefusedLocked() error {
	return q.usableLocked("change the dead set")
}

// deadRef is what a requeue of a dead letter needs of it: its name and
// where its payload is.
type deadRef struct {
	seq, loc uint64 // index.Entry's Seq and Loc
	id       string
}

// deadRefs returns every dead letter as the index holds it now.
func (q *Queue) deadRefs() ([]deadRef, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.deadRefusedLocked(); err != nil {
		return nil, err
	}
	out := make([]deadRef, 0, q.mu.st.table.Counts().Dead)
	q.mu.st.table.Dead(0, func(e index.Entry) bool {
		out = append(out, deadRef{seq: e.Seq, loc: e.Loc, id: e.ID})
		return true
	})
	return out, nil
}

// changeSeqsLocked appends a record of op o for each message (or sorted
// value) seq, releases q.mu, which the caller holds, and waits for the
// commit. With wake, consumers look again: the records made work ready.
// It returns how many records it appended.
func (q *Queue) changeSeqsLocked(o op, seqs []uint64, wake bool) (int, error) {
	var last *wal.Commit
	for i, seq := range seqs {
		c, err := q.appendLocked(&record{Op: o, Seq: seq, At: q.now()}, nil)
		if err != nil {
			q.mu.Unlock()
			return i, err
		}
		last = c
	}
	q.mu.Unlock()
	if err := wait(last); err != nil {
		return 0, err
	}
	if wake && len(seqs) > 0 {
		q.signal()
	}
	return len(seqs), nil
}

func (q *Queue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.closed
}
