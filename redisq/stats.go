package redisq

import (
	"context"
	"errors"
	"fmt"

	"github.com/walq/walq/queue"
)

// Stats returns the queue's counts and lifetime counters, as queue.Stats;
// the log fields stay zero. At is when it read them, by the handle's
// clock (Options.Clock). On an error it returns only the handle's
// configuration (Sync, AckTimeout), At, and Closed, set once Close has
// begun: a closed handle reads nothing, so its counts are then zero;
// StatsContext reports the error (queue.ErrClosed).
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
	if len(r) < 6 {
		return s, fmt.Errorf("redisq: stats: unexpected reply %v", v)
	}
	s.Ready, s.Delayed, s.InFlight, s.Dead = toInt(r[0]), toInt(r[1]), toInt(r[2]), toInt(r[3])
	s.DedupIDs = int(toInt(r[4]))
	if raw, _ := r[5].(string); raw != "" {
		m, err := decodeMessage(raw, queue.Receipt{})
		if err != nil {
			return s, err
		}
		s.OldestEnqueuedAt = m.EnqueuedAt
	}
	counters := map[string]*uint64{"enqueued": &s.Enqueued, "delivered": &s.Delivered, "acked": &s.Acked,
		"nacked": &s.Nacked, "expired": &s.Expired, "dead": &s.DeadLettered}
	for i := 6; i+1 < len(r); i += 2 {
		name, _ := r[i].(string)
		if p := counters[name]; p != nil {
			*p = uint64(toInt(r[i+1]))
		}
	}
	return s, nil
}
