package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/walq/walq/queue"
)

// SortedEngine is an Engine that also opens the sorted and windowed
// queues its targets name: stats, requeue-expired, and dlq list, show,
// requeue and purge on their dead values then run on them as on a
// directory's.
type SortedEngine interface {
	Engine
	// OpenSorted opens the sorted or windowed queue target names, as Open
	// does an ack queue (o.Inspect: a handle that changes nothing). The
	// queue has the methods of queue.DeadValueSet[K], for K int64,
	// uint64, float64, string or time.Time, and RequeueExpired, Stats
	// and Close; with an Identity() queue.Identity method, it says
	// whether it is sorted or windowed, and its sort key type. It
	// returns nil and no error when target holds no sorted or windowed
	// queue, or an ack queue too (the commands then take the ack queue).
	OpenSorted(ctx context.Context, target string, o EngineOptions) (any, error)
}

// deadSetQueue is what the CLI needs of a sorted or windowed queue to
// list, requeue and purge its dead values, end its expired leases and
// read its figures.
type deadSetQueue[K queue.SortKey] interface {
	queue.DeadValueSet[K]
	RequeueExpired() (int, error)
	Stats() queue.Stats
	Close() error
}

// engineSorted opens target with the engine when the engine owns it and
// opens sorted queues, with o (TrustServer: the command's); nil when
// target holds no sorted queue.
func engineSorted(e *env, target string, o EngineOptions) (sortedView, error) {
	se, ok := e.engine.(SortedEngine)
	if !ok {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o.TrustServer = e.trustServer
	x, err := se.OpenSorted(ctx, target, o)
	if err != nil || x == nil {
		if err != nil {
			err = fmt.Errorf("open %s: %w", Redacted(target), err)
		}
		return nil, err
	}
	id := queue.Identity{Kind: queue.KindSorted}
	if i, ok := x.(interface{ Identity() queue.Identity }); ok {
		id = i.Identity()
	}
	switch q := x.(type) {
	case deadSetQueue[int64]:
		return setView[int64]{q: q, text: plainText[int64], id: id}, nil
	case deadSetQueue[uint64]:
		return setView[uint64]{q: q, text: plainText[uint64], id: id}, nil
	case deadSetQueue[float64]:
		return setView[float64]{q: q, text: plainText[float64], id: id}, nil
	case deadSetQueue[string]:
		return setView[string]{q: q, text: plainText[string], id: id}, nil
	case deadSetQueue[time.Time]:
		return setView[time.Time]{q: q, text: timeText, id: id}, nil
	}
	err = fmt.Errorf("open %s: the engine returned a %T, not a sorted queue's dead values", Redacted(target), x)
	if c, ok := x.(interface{ Close() error }); ok {
		_ = c.Close() // the error that matters is err
	}
	return nil, err
}

// setView is a sortedView of a queue of an engine: no files, so nothing
// to compact and no recovery.
type setView[K queue.SortKey] struct {
	q    deadSetQueue[K]
	text func(K) string // the sort key for people
	id   queue.Identity // what the engine says the queue is; Format 0
}

func (v setView[K]) deadValues(from uint64, max int) ([]deadValueRow, error) {
	ds, err := v.q.DeadValues(from, max)
	out := make([]deadValueRow, len(ds))
	for i, d := range ds {
		out[i] = deadValueRow{Seq: d.Seq, Key: d.Key, Sort: v.text(d.Sort), Reason: d.Reason,
			Deliveries: d.Deliveries, PublishedAt: d.PublishedAt, Payload: d.Payload}
	}
	return out, err
}

func (v setView[K]) requeueDead(n deadName) error {
	if !n.fenced {
		return v.q.RequeueDead(n.seq)
	}
	return v.q.RequeueDeadValue(queue.DeadValue[K]{Seq: n.seq, PublishedAt: time.Unix(0, n.at)})
}

func (v setView[K]) purgeDead(n deadName) error {
	if !n.fenced {
		return v.q.PurgeDead(n.seq)
	}
	return v.q.PurgeDeadValue(queue.DeadValue[K]{Seq: n.seq, PublishedAt: time.Unix(0, n.at)})
}

func (v setView[K]) requeueAllDead() (int, error) { return v.q.RequeueAllDead() }
func (v setView[K]) requeueExpired() (int, error) { return v.q.RequeueExpired() }
func (v setView[K]) identity() queue.Identity     { return v.id }
func (v setView[K]) purgeAllDead() (int, error)   { return v.q.PurgeAllDead() }
func (v setView[K]) stats() queue.Stats           { return v.q.Stats() }

// readStats is stats with the error of an engine that reports one.
func (v setView[K]) readStats() (queue.Stats, error) { return engineStats(v.q) }
func (v setView[K]) recovery() queue.Recovery        { return queue.Recovery{} }
func (v setView[K]) inUse() bool                     { return false }
func (v setView[K]) close() error                    { return v.q.Close() }

func (v setView[K]) compact() error {
	return fmt.Errorf("%w: a queue on a server has no log to compact", queue.ErrInvalidOptions)
}
