package redisq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/walq/walq/queue"
)

// handle is what every kind of queue handle shares: the subscription to
// the queue's wake channel, the blocked consumers it wakes, the
// housekeeper, and Close.
type handle struct {
	rdb   redis.UniversalClient // the caller's client; Close leaves it open
	keys  []string              // the queue's keys, in its scripts' order, under one hash tag
	wake  string                // its pub/sub channel: 'r' ready, 't<µs>' an earlier deadline
	types []string              // the Redis type of each key (wrongtype.go)
	o     Options               // with defaults filled in
	// resends: the client may send a command again itself
	// (Options.clientResends), so a dial's error does not prove that
	// nothing of the call was written (unrun). Set by Open.
	resends bool

	ready  notifier      // blocked consumers
	kick   chan struct{} // one slot: a deadline earlier than the housekeeper's timer was set
	armed  atomic.Int64  // when the housekeeper's timer fires, Unix µs; unarmed (MaxInt64) during a pass
	closed chan struct{} // closed by Close
	once   sync.Once     // guards close(closed)
	ps     *redis.PubSub // the handle's one subscription
	// life is the context the subscription receives, pings and dials
	// again under (listen) and the housekeeper's passes run under
	// (passContext); unsubscribe ends it, Close first. listened is
	// closed when listen returns.
	life        context.Context
	unsubscribe context.CancelFunc
	listened    chan struct{}
	wg          sync.WaitGroup // the housekeeper
}

// unarmed is the housekeeper's timer while a pass runs: any deadline
// announced then is earlier and kicks it, since the pass may have read the
// server before that deadline was set.
const unarmed = math.MaxInt64

// sweepFunc ends expired leases (when expire) and promotes what is due;
// it returns how many leases it ended and how long until the next
// deadline (-1: none).
type sweepFunc func(expire bool) (int, time.Duration, error)

func newHandle(rdb redis.UniversalClient, ks []string, wake string, o Options) *handle {
	h := &handle{rdb: rdb, keys: ks, wake: wake, o: o, kick: make(chan struct{}, 1), closed: make(chan struct{})}
	h.armed.Store(unarmed)
	return h
}

// start subscribes (before anything can be missed: a message made ready
// after this point reaches the handle) and starts the listener and,
// unless the handle is ReadOnly, the housekeeper.
func (h *handle) start(ctx context.Context, sweep sweepFunc) error {
	h.ps = h.rdb.Subscribe(ctx, h.wake)
	// A subscription whose connection dropped, or that could not connect,
	// subscribes again on the next (go-redis's PubSub reconnects, and a
	// cluster client's looks up the channel's node again); subscribing
	// twice changes nothing.
	if err := h.rideAgain(ctx, func(ctx context.Context) error { _, err := h.ps.Receive(ctx); return err }); err != nil {
		_ = h.ps.Close()
		return fmt.Errorf("redisq: subscribe to %s: %w", h.wake, err)
	}
	h.life, h.unsubscribe = context.WithCancel(context.Background())
	h.listened = make(chan struct{})
	go h.listen(h.life)
	if !h.o.ReadOnly {
		h.wg.Add(1)
		go h.housekeep(sweep)
	}
	return nil
}

// Close stops the handle: it wakes blocked consumers with ErrClosed,
// stops the housekeeper and the subscription, and waits for them. The
// client stays open. Leases held through this handle keep running on the
// server until their deadline, so they can be settled elsewhere.
// go-redis's PubSub dials its connection again holding the lock its
// Close takes, under the context of the call that found it broken: the
// handle's receive loop (listen) runs under a context that Close ends
// first, which ends such a dial (a client's Dialer that waits on its
// context alone would otherwise wait for ever on an address that drops
// packets). A Dialer that ignores its context is not ended so: Close
// waits for the subscription's close no longer than OpTimeout
// (closeSubscription).
func (h *handle) Close() error {
	first := false
	h.once.Do(func() {
		close(h.closed)
		first = true
	})
	if !first {
		return queue.ErrClosed
	}
	err := h.closeSubscription()
	h.wg.Wait()
	return err
}

// closeSubscription ends the receive loop's context, which ends a dial
// of the subscription's reconnection, closes the subscription and waits
// for the loop to return, no longer than OpTimeout: past it (a Dialer
// that ignores its context), the close goes on by itself once the
// subscription's dial ends, and the error says so.
func (h *handle) closeSubscription() error {
	h.unsubscribe()
	done := make(chan error, 1)
	go func() {
		err := h.ps.Close()
		<-h.listened
		done <- err
	}()
	t := time.NewTimer(h.o.OpTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("redisq: close subscription: %w", err)
		}
		return nil
	case <-t.C:
		return fmt.Errorf("redisq: close subscription: not closed within %v (Options.OpTimeout): its connection is "+
			"being dialled again and closes once that dial ends: %w", h.o.OpTimeout, context.DeadlineExceeded)
	}
}

func (h *handle) isClosed() bool {
	select {
	case <-h.closed:
		return true
	default:
		return false
	}
}

// awaitedKey is the context key of a call that Close waits for and so
// lets run after it began (call): the settles a grouped Dequeues' call
// makes of what it leased, the give-back of the leases it took for
// callers that left (giveBack) and the burial of an undecodable body
// (bury), which run in that call, counted by the coalescer's running
// calls. No other call carries it: anything else finds the handle
// closed.
type awaitedKey struct{}

// awaited returns ctx marked as a call Close waits for.
func awaited(ctx context.Context) context.Context {
	return context.WithValue(ctx, awaitedKey{}, true)
}

// passContext bounds a housekeeping pass (the housekeeper's, or
// RequeueExpired's) by callTimeout and ends it at Close, so that Close
// does not wait for a pass stuck waiting for a connection to a dead
// address (a pass may run again whenever, so one cut short is
// harmless). A call already written is not cut short: go-redis ends its
// wait for the reply at the context's deadline, not at its cancel, so
// Close, waiting for the housekeeper, learns what such a call did.
func (h *handle) passContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(h.life, h.callTimeout())
}

// opContext bounds a call that takes no context by callTimeout.
func (h *handle) opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), h.callTimeout())
}

// callTimeout is how long one call may take: Options.OpTimeout, and with
// Options.Replicas the WAIT after it too (WaitTimeout), so that a client
// ending a command's wait with its context (go-redis
// ContextTimeoutEnabled) does not drop the reply of a call the server
// ran while its WAIT still waits.
func (h *handle) callTimeout() time.Duration {
	if h.o.Replicas > 0 {
		return h.o.OpTimeout + h.o.WaitTimeout
	}
	return h.o.OpTimeout
}

// leaseContext bounds a call that leases (a dequeue, a pull) by
// callTimeout instead of ctx, whose values it keeps: what the server
// leased is the caller's, and a client that ends a command's wait for its
// reply when the command's context ends (go-redis ContextTimeoutEnabled)
// would drop the reply of a call the server ran, leaving its messages
// leased, unseen, until their deadline. The caller checks ctx before
// each call instead, and a call waiting to send again what the server
// refused (rideMoves), which leased nothing, stops when ctx ends.
func (h *handle) leaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithValue(context.WithoutCancel(ctx), callerKey{}, ctx), h.callTimeout())
}

// primary returns what talks to the server holding the queue's keys: a
// cluster's master of their slot, a Ring's shard of their hash tag (a
// Ring sends a command without keys, WAIT, CONFIG GET, FUNCTION LOAD, to
// any shard), else the client itself.
func (h *handle) primary(ctx context.Context) redis.Cmdable {
	switch rc := h.rdb.(type) {
	case *redis.ClusterClient:
		if c, err := rc.MasterForKey(ctx, h.keys[0]); err == nil {
			return c
		}
	case *redis.Ring:
		if c, err := rc.GetShardClientForKey(h.keys[0]); err == nil {
			return c
		}
	}
	return h.rdb
}

// call runs a function over the queue's keys, loading its library first
// where the server lacks it, and with Options.Replicas waits for the
// replicas on the same connection after a function that may write. A
// call the server refused without running it (a cluster's MOVED, ASK,
// TRYAGAIN or CLUSTERDOWN, READONLY, LOADING) or that was never sent (a
// dial error, the pool's timeout) is sent again until the server takes
// it (rideMoves). Once Close began it sends nothing (queue.ErrClosed),
// unless ctx marks a call Close waits for (awaited), which it sends, and
// sends again while refused or unsent, as before Close.
func (h *handle) call(ctx context.Context, f function, argv []any) (any, error) {
	if h.isClosed() && ctx.Value(awaitedKey{}) == nil {
		return nil, queue.ErrClosed
	}
	if h.o.ReadOnly && f.writes {
		return nil, queue.ErrReadOnly
	}
	v, err := h.rideMoves(ctx, func(ctx context.Context) (any, error) { return h.callOnce(ctx, f, argv) })
	return v, h.wrongType(ctx, timedOut(ctx, err))
}

// callOnce is one run of call: a refusal (refused) comes back as it is,
// for call to send it again.
func (h *handle) callOnce(ctx context.Context, f function, argv []any) (any, error) {
	load := func(c redis.Cmdable) error { return f.lib.load(ctx, c) }
	if h.o.Replicas > 0 && f.writes { // a read changes nothing to wait for
		return h.runWait(ctx, func(p redis.Pipeliner) *redis.Cmd { return h.send(ctx, p, f, argv) },
			missing, load)
	}
	var v any
	do := func() (err error) { v, err = h.fcall(ctx, f, argv); return err }
	if !f.writes { // a read runs twice harmlessly
		return v, sendAgain(ctx, do)
	}
	return v, do()
}

// timedOut returns err, wrapping ctx's error as well where ctx ended and
// the client reported it as its connection's timeout: a client that ends
// a command's wait with its context (go-redis ContextTimeoutEnabled)
// gives the connection the context's deadline, and, as it sends nothing
// again (MaxRetries -1), returns the read's i/o timeout, where a retrying
// client's wait before the retry returned the context's error.
// The connection's deadline may pass a moment before the context marks
// itself done, so a passed deadline counts as the context's end.
func timedOut(ctx context.Context, err error) error {
	var ne net.Error
	if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		return err
	}
	end := ctx.Err()
	if d, ok := ctx.Deadline(); end == nil && ok && !time.Now().Before(d) {
		end = context.DeadlineExceeded
	}
	if end == nil || errors.Is(err, end) {
		return err
	}
	return fmt.Errorf("%w (%w)", end, err)
}

// fcall runs a function over the queue's keys, loading its library first
// where the server lacks it.
func (h *handle) fcall(ctx context.Context, f function, argv []any) (any, error) {
	v, err := h.send(ctx, h.rdb, f, argv).Result()
	if !missing(err) {
		return v, err
	}
	if err := f.lib.load(ctx, h.primary(ctx)); err != nil {
		return nil, err
	}
	return h.send(ctx, h.rdb, f, argv).Result()
}

// send calls f over the queue's keys on c (those f touches, where its
// calls carry only those: function.keys). A ReadOnly handle calls its
// functions, which write nothing, with FCALL_RO: the server checks the
// keys of an FCALL for reading and writing, those of an FCALL_RO for
// reading only, so a user granted the queue's keys for reading alone
// (%R~) runs them. Other handles use FCALL, for every function, so that
// the commands a writer needs stay the same.
func (h *handle) send(ctx context.Context, c redis.Cmdable, f function, argv []any) *redis.Cmd {
	if h.o.ReadOnly && !f.writes {
		return c.FCallRO(ctx, f.name, f.pick(h.keys), argv...)
	}
	return c.FCall(ctx, f.name, f.pick(h.keys), argv...)
}

// runWait pipelines a call (send) and WAIT on one connection: WAIT counts
// the replicas that received the writes of its own connection. When the
// server lacks the code (absent), it loads it (load) and tries once more.
// A WAIT that falls short or fails (ErrNotDurable) comes with the call's
// reply, as the call ran.
func (h *handle) runWait(ctx context.Context, send func(redis.Pipeliner) *redis.Cmd, absent func(error) bool, load func(redis.Cmdable) error) (any, error) {
	c := h.primary(ctx)
	for try := 0; ; try++ {
		pipe := c.Pipeline()
		ev := send(pipe)
		w := pipe.Do(ctx, "WAIT", h.o.Replicas, h.o.WaitTimeout.Milliseconds())
		_, _ = pipe.Exec(ctx) // errors are read per command below
		if err := ev.Err(); err != nil {
			if try == 0 && absent(err) {
				if err := load(c); err != nil {
					return nil, err
				}
				continue
			}
			return nil, err
		}
		if err := w.Err(); err != nil { // the call ran: its reply says what it did
			return ev.Val(), fmt.Errorf("%w: WAIT: %v", ErrNotDurable, err)
		}
		if n, _ := w.Int64(); n < int64(h.o.Replicas) {
			return ev.Val(), fmt.Errorf("%w: %d of %d replicas", ErrNotDurable, n, h.o.Replicas)
		}
		return ev.Val(), nil
	}
}
