package queue

import (
	"errors"
	"fmt"
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
// "; corrupt record: " and the read error, so that it can still be told,
// requeued or purged by id. Another read error fails the call.
func (q *Queue) DeadLetters(from uint64, max int) ([]DeadLetter, error) {
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return nil, ErrClosed
	}
	var es []index.Entry
	q.mu.st.table.Dead(from, func(e index.Entry) bool {
		es = append(es, e)
		return max <= 0 || len(es) < max
	})
	q.mu.Unlock()
	out := make([]DeadLetter, 0, len(es))
	for _, e := range es {
		d := DeadLetter{ID: e.ID, Seq: e.Seq, Reason: e.Reason, Deliveries: int(e.Deliveries),
			EnqueuedAt: time.Unix(0, e.EnqueuedAt)}
		m := &Message{Receipt: Receipt{Seq: e.Seq}}
		switch err := q.readPayload(m, e.Loc); {
		case errors.Is(err, ErrCorrupt):
			d.Reason += "; " + corruptReason + err.Error()
		case err != nil:
			return nil, err
		default:
			d.Payload, d.Headers = m.Payload, m.Headers
		}
		out = append(out, d)
	}
	return out, nil
}

// corruptReason starts what DeadLetters adds to the reason of a letter it
// cannot read; the Redis engine's listing says the same of its damaged
// letters.
const corruptReason = "corrupt record: "

// RequeueDead makes the dead letter with id ready again, with its delivery
// count reset.
func (q *Queue) RequeueDead(id string) error {
	return q.changeDead(id, opRequeueDead)
}

// PurgeDead removes the dead letter with id for good.
func (q *Queue) PurgeDead(id string) error {
	return q.changeDead(id, opPurge)
}

// RequeueAllDead makes every dead letter ready again and returns how many.
func (q *Queue) RequeueAllDead() (int, error) { return q.changeAllDead(opRequeueDead) }

// PurgeAllDead removes every dead letter and returns how many.
func (q *Queue) PurgeAllDead() (int, error) { return q.changeAllDead(opPurge) }

func (q *Queue) changeDead(id string, o op) error {
	q.mu.Lock()
	e, ok := q.mu.st.table.GetByID(id)
	if !ok || e.State != index.Dead {
		q.mu.Unlock()
		if q.isClosed() {
			return ErrClosed
		}
		return fmt.Errorf("%w: no dead letter %q", ErrNotFound, id)
	}
	_, err := q.changeSeqsLocked(o, []uint64{e.Seq}, o == opRequeueDead)
	return err
}

func (q *Queue) changeAllDead(o op) (int, error) {
	q.mu.Lock()
	var seqs []uint64
	q.mu.st.table.Dead(0, func(e index.Entry) bool {
		seqs = append(seqs, e.Seq)
		return true
	})
	return q.changeSeqsLocked(o, seqs, o == opRequeueDead)
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
