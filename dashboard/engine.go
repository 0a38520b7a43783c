package dashboard

import (
	"context"
	"fmt"

	"github.com/walq/walq/queue"
)

// ForAckQueue returns the Source of any engine's ack queue through the
// method set every engine offers (queue.AckQueue): the Redis backend's, or
// the embedded queue seen through the interface. It shows the figures and
// the dead-letter set, with requeue and purge; the ready, in-flight and
// delayed lists are empty, since the shared method set cannot read
// messages without delivering them (ForQueue can, for the embedded queue).
// A dead letter's Ref is "SEQ@ID" (SEQ~HEX, the id in hex, for an id that
// is not UTF-8); a Ref whose seq now holds a dead letter with another id
// is not found, never requeued or purged, and a bare seq is refused.
func ForAckQueue(q queue.AckQueue) Source { return ackSource{q} }

type ackSource struct{ q queue.AckQueue }

// statsReader is an engine that reports why its figures could not be
// read (redisq's Queue): its Stats alone would return zeros.
type statsReader interface {
	StatsContext(ctx context.Context) (queue.Stats, error)
}

func (s ackSource) Stats(ctx context.Context) (Stats, error) {
	r, ok := s.q.(statsReader)
	if !ok {
		return fromStats("queue", s.q.Stats())
	}
	st, err := r.StatsContext(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("dashboard: stats: %w", err)
	}
	return fromStats("queue", st)
}

func (s ackSource) Messages(_ context.Context, state, after string, limit int) (Page, error) {
	st, err := queue.ParseMessageState(state)
	if err != nil {
		return Page{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if st != queue.StateDead {
		return Page{Messages: []Message{}}, nil
	}
	from, err := pageStart(after)
	if err != nil {
		return Page{}, err
	}
	ds, err := s.q.DeadLetters(from, limit+1)
	if err != nil {
		return Page{}, err
	}
	return pageOf(ds, limit, fromDeadLetter), nil
}

func (s ackSource) Message(_ context.Context, ref string) (Message, error) {
	d, err := s.dead(ref)
	if err != nil {
		return Message{}, err
	}
	m := fromDeadLetter(d)
	m.Headers, m.Payload = d.Headers, d.Payload
	return m, nil
}

func (s ackSource) RequeueDead(_ context.Context, ref string) error {
	return s.deadAction(ref, refusing(s.q.RequeueDead))
}

func (s ackSource) PurgeDead(_ context.Context, ref string) error {
	return s.deadAction(ref, s.q.PurgeDead)
}

// dead returns the dead letter ref (SEQ@ID) names: the one with that seq,
// while it has that id.
func (s ackSource) dead(text string) (queue.DeadLetter, error) {
	if err := mustName(text); err != nil {
		return queue.DeadLetter{}, err
	}
	r, err := parseRef(text, false)
	if err != nil {
		return queue.DeadLetter{}, err
	}
	ds, err := s.q.DeadLetters(r.seq, 1)
	if err != nil {
		return queue.DeadLetter{}, err
	}
	if len(ds) == 0 {
		return queue.DeadLetter{}, fmt.Errorf("%w: no dead letter %d", ErrNotFound, r.seq)
	}
	if err := r.check(ds[0].Seq, ds[0].ID); err != nil {
		return queue.DeadLetter{}, err
	}
	return ds[0], nil
}

// deadAction runs act on the id of the dead letter ref names.
func (s ackSource) deadAction(ref string, act func(id string) error) error {
	d, err := s.dead(ref)
	if err != nil {
		return err
	}
	if err := act(d.ID); err != nil {
		return actionError(err)
	}
	return nil
}

func fromDeadLetter(d queue.DeadLetter) Message {
	return Message{Ref: deadLetterRef(d.Seq, d.ID), ID: d.ID, State: queue.StateDead.String(),
		EnqueuedAt: d.EnqueuedAt, Deliveries: d.Deliveries, Reason: d.Reason, Size: len(d.Payload)}
}
