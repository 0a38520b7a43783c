package queue

import (
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
// from, oldest first, with their payloads.
func (q *Queue) DeadLetters(from uint64, max int) ([]DeadLetter, error) {
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return nil, ErrClosed
	}
	var es []index.Entry
	var last uint64 // the highest Loc
	q.mu.st.table.Dead(from, func(e index.Entry) bool {
		es = append(es, e)
		if e.Loc > last {
			last = e.Loc
		}
		return len(es) < max
	})
	q.mu.Unlock()
	// A compaction may have just copied a dead letter forward: its record
	// is appended but may not be written yet.
	if last > q.log.WrittenLSN() {
		if err := q.log.Flush(); err != nil {
			return nil, fmt.Errorf("queue: dead letters: %w", err)
		}
	}
	out := make([]DeadLetter, 0, len(es))
	for _, e := range es {
		d := DeadLetter{ID: e.ID, Seq: e.Seq, Reason: e.Reason, Deliveries: int(e.Deliveries),
			EnqueuedAt: time.Unix(0, e.EnqueuedAt)}
		m := &Message{Receipt: Receipt{Seq: e.Seq}}
		if err := q.readPayload(m, e.Loc); err != nil {
			return nil, err
		}
		d.Payload, d.Headers = m.Payload, m.Headers
		out = append(out, d)
	}
	return out, nil
}

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
	c, err := q.appendLocked(&record{Op: o, Seq: e.Seq, At: q.now()}, nil)
	q.mu.Unlock()
	if err != nil {
		return err
	}
	if err := wait(c); err != nil {
		return err
	}
	if o == opRequeueDead {
		q.signal()
	}
	return nil
}

func (q *Queue) changeAllDead(o op) (int, error) {
	q.mu.Lock()
	var es []index.Entry
	q.mu.st.table.Dead(0, func(e index.Entry) bool {
		es = append(es, e)
		return true
	})
	var last *wal.Commit
	for i, e := range es {
		c, err := q.appendLocked(&record{Op: o, Seq: e.Seq, At: q.now()}, nil)
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
	if o == opRequeueDead && len(es) > 0 {
		q.signal()
	}
	return len(es), nil
}

func (q *Queue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.closed
}
