package redisq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/walq/walq/queue"
)

// Stats returns the queue's counts and lifetime counters, as queue.Stats;
// the log fields stay zero. At is when it read them, by the handle's
// clock (Options.Clock). OldestEnqueuedAt is read from the stored body of
// the oldest live message; when that body is missing or does not decode,
// OldestEnqueuedAt is zero and OldestErr, wrapping queue.ErrCorrupt, names
// the message (its delivery buries it in the dead-letter set). On an
// error it returns only the handle's configuration (Sync, AckTimeout),
// At, and Closed, set once Close has begun: a closed handle reads
// nothing, so its counts are then zero; StatsContext reports the error
// (queue.ErrClosed). A lifetime counter that reads below zero on the
// server (Acked once the sequence counter was deleted or lowered by
// hand) is reported as 0, and CountsErr, wrapping queue.ErrCorrupt,
// names it (total).
func (q *Queue) Stats() queue.Stats {
	ctx, cancel := q.opContext()
	defer cancel()
	s, _ := q.StatsContext(ctx)
	return s
}

// StatsContext is Stats with a context and an error.
func (q *Queue) StatsContext(ctx context.Context) (queue.Stats, error) {
	now := q.o.Clock.Now()
	s := queue.Stats{Sync: q.o.Sync, AckTimeout: q.o.AckTimeout, At: now, Closed: q.isClosed()}
	v, err := q.run(ctx, fnInspect, now, "stats")
	if err != nil {
		s.Closed = s.Closed || errors.Is(err, queue.ErrClosed)
		return s, scriptErr("stats", err)
	}
	r, _ := v.([]any)
	if len(r) < 7 {
		return s, fmt.Errorf("redisq: stats: unexpected reply %v", v)
	}
	s.Ready, s.Delayed, s.InFlight, s.Dead = toInt(r[0]), toInt(r[1]), toInt(r[2]), toInt(r[3])
	s.DedupIDs = int(toInt(r[4]))
	s.OldestEnqueuedAt, s.OldestErr = oldestAt(r[5], uint64(toInt(r[6])))
	counters := map[string]*uint64{"enqueued": &s.Enqueued, "delivered": &s.Delivered, "acked": &s.Acked,
		"nacked": &s.Nacked, "expired": &s.Expired, "dead": &s.DeadLettered}
	var damage []error
	for i := 7; i+1 < len(r); i += 2 {
		name, _ := r[i].(string)
		if p := counters[name]; p != nil {
			why := "written by hand"
			if name == "acked" {
				why = "key " + q.keys[0] + ", the sequence counter, was deleted or lowered below the messages the queue holds and purged"
			}
			var err error
			*p, err = total(name, toInt(r[i+1]), why)
			damage = append(damage, err)
		}
	}
	s.CountsErr = errors.Join(damage...)
	return s, nil
}

// total reads the lifetime total name, n in a stats reply: one below
// zero is reported as 0, never wrapped to a count near 2^64, with an
// error wrapping queue.ErrCorrupt that says why (the damage that made
// it so). An ack queue's Acked, derived from the sequence counter less
// the live and purged messages (scripts/inspect.lua), is below zero
// once an operator deleted or lowered the sequence counter, and an
// enqueue would then reuse the seq of a live message; a stored total
// only where written by hand.
func total(name string, n int64, why string) (uint64, error) {
	if n >= 0 {
		return uint64(n), nil
	}
	return 0, fmt.Errorf("%w: redisq: stats: %s reads %d, below zero: %s", queue.ErrCorrupt, name, n, why)
}

// oldestAt returns the enqueue time in raw, the stored body of message
// seq, the oldest live one (seq 0: there is none), or an error wrapping
// queue.ErrCorrupt when that body is missing ("") or does not decode.
func oldestAt(raw any, seq uint64) (time.Time, error) {
	if seq == 0 {
		return time.Time{}, nil
	}
	body, _ := raw.(string)
	if body == "" {
		return time.Time{}, fmt.Errorf("%w: redisq: stats: the body of message %d, the oldest live one, is missing", queue.ErrCorrupt, seq)
	}
	m, err := decodeMessage(body, queue.Receipt{Seq: seq})
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: redisq: stats: the oldest live message: %w", queue.ErrCorrupt, err)
	}
	return m.EnqueuedAt, nil
}
