package redisq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/walq/walq/queue"
)

// Queue is a handle on an ack queue kept in Redis. Any number of handles,
// in any number of processes, may share one queue; each is safe for
// concurrent use. Close stops the handle, not the queue: leases and
// messages live on in the server.
type Queue struct {
	rdb  redis.UniversalClient // the caller's client; Close leaves it open
	name string                // the queue's name, inside the hash tag
	k    keys                  // its keys and channel
	o    Options               // with defaults filled in

	ready  notifier      // blocked consumers
	kick   chan struct{} // one slot: a deadline earlier than the housekeeper's timer was set
	armed  atomic.Int64  // when the housekeeper's timer fires, Unix µs
	closed chan struct{} // closed by Close
	once   sync.Once     // guards close(closed)
	ps     *redis.PubSub // the handle's one subscription, to k.wake
	wg     sync.WaitGroup
	acks   coalescer // concurrent Acks, settled by one script call
}

var _ queue.AckQueue = (*Queue)(nil)

// Open returns a handle on the queue called name in the server rdb talks
// to, creating nothing until the first enqueue. Unless opts.TrustServer is
// set it first checks that the server keeps the durability opts.Sync
// asks for (see the package documentation).
func Open(ctx context.Context, rdb redis.UniversalClient, name string, opts *Options) (*Queue, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if name == "" || strings.ContainsAny(name, "{}") {
		return nil, fmt.Errorf("%w: redisq: queue name %q is empty or holds a brace", queue.ErrInvalidOptions, name)
	}
	q := &Queue{rdb: rdb, name: name, k: newKeys(name), o: o,
		kick: make(chan struct{}, 1), closed: make(chan struct{})}
	if !o.TrustServer {
		if err := checkServer(ctx, q.primary(ctx), o.Sync); err != nil {
			return nil, err
		}
	}
	// Subscribe before anything can be missed: a message made ready after
	// this point reaches the handle.
	q.ps = rdb.Subscribe(ctx, q.k.wake)
	if _, err := q.ps.Receive(ctx); err != nil {
		_ = q.ps.Close()
		return nil, fmt.Errorf("redisq: subscribe to %s: %w", q.k.wake, err)
	}
	q.wg.Add(2)
	go q.listen(q.ps.ChannelWithSubscriptions())
	go q.housekeep()
	return q, nil
}

// Close stops the handle: it wakes blocked consumers with ErrClosed,
// stops the housekeeper and the subscription, and waits for them. The
// client stays open. Leases held by this handle keep running on the
// server until their deadline, so their receipts can be acked elsewhere.
func (q *Queue) Close() error {
	first := false
	q.once.Do(func() {
		close(q.closed)
		first = true
	})
	if !first {
		return queue.ErrClosed
	}
	err := q.ps.Close()
	q.wg.Wait()
	if err != nil {
		return fmt.Errorf("redisq: close subscription: %w", err)
	}
	return nil
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

func (q *Queue) isClosed() bool {
	select {
	case <-q.closed:
		return true
	default:
		return false
	}
}

// opContext bounds a call that takes no context by Options.OpTimeout.
func (q *Queue) opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), q.o.OpTimeout)
}

// primary returns what talks to the server holding the queue's slot.
func (q *Queue) primary(ctx context.Context) redis.Cmdable {
	if cc, ok := q.rdb.(*redis.ClusterClient); ok {
		if c, err := cc.MasterForKey(ctx, q.k.all[0]); err == nil {
			return c
		}
	}
	return q.rdb
}

// run runs a state-changing script at time now, and with Options.Replicas
// waits for the replicas on the same connection.
func (q *Queue) run(ctx context.Context, s *redis.Script, now time.Time, args ...any) (any, error) {
	if q.isClosed() {
		return nil, queue.ErrClosed
	}
	argv := append([]any{q.k.wake, unixMicros(now), q.o.MaxDeliveries, micros(q.o.DedupWindow)}, args...)
	if q.o.Replicas == 0 {
		return s.Run(ctx, q.rdb, q.k.all, argv...).Result()
	}
	return q.runWait(ctx, s, argv)
}

// runWait pipelines the script and WAIT on one connection: WAIT counts the
// replicas that received the writes of its own connection.
func (q *Queue) runWait(ctx context.Context, s *redis.Script, argv []any) (any, error) {
	c := q.primary(ctx)
	for try := 0; ; try++ {
		pipe := c.Pipeline()
		ev := pipe.EvalSha(ctx, s.Hash(), q.k.all, argv...)
		w := pipe.Do(ctx, "WAIT", q.o.Replicas, q.o.WaitTimeout.Milliseconds())
		_, _ = pipe.Exec(ctx) // errors are read per command below
		if err := ev.Err(); err != nil {
			if try == 0 && redis.HasErrorPrefix(err, "NOSCRIPT") {
				if err := s.Load(ctx, c).Err(); err != nil {
					return nil, err
				}
				continue
			}
			return nil, err
		}
		if err := w.Err(); err != nil {
			return nil, fmt.Errorf("%w: WAIT: %v", ErrNotDurable, err)
		}
		if n, _ := w.Int64(); n < int64(q.o.Replicas) {
			return ev.Val(), fmt.Errorf("%w: %d of %d replicas", ErrNotDurable, n, q.o.Replicas)
		}
		return ev.Val(), nil
	}
}

// scriptErr maps a script's error replies onto walq's sentinels.
func scriptErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, queue.ErrClosed), errors.Is(err, ErrNotDurable):
		return err
	case strings.Contains(err.Error(), "DUPLICATE"):
		_, id, _ := strings.Cut(err.Error(), "DUPLICATE ")
		return fmt.Errorf("%w: %q", queue.ErrDuplicate, id)
	}
	return fmt.Errorf("redisq: %s: %w", op, err)
}

// toInt reads an integer of a script's reply.
func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}
