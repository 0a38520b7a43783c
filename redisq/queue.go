package redisq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/walq/walq/queue"
)

// Queue is a handle on an ack queue kept in Redis. Any number of handles,
// in any number of processes, may share one queue; each is safe for
// concurrent use. Close stops the handle, not the queue: leases and
// messages live on in the server.
type Queue struct {
	*handle
	name   string                   // the queue's name, inside the hash tag
	acks   coalescer[queue.Receipt] // concurrent Acks, settled by one call
	enqs   coalescer[enqueueReq]    // concurrent Enqueues, run by one call
	leases coalescer[*leaseReq]     // concurrent lone Dequeues, leased for by one call
}

var _ queue.AckQueue = (*Queue)(nil)

// Close stops the handle. It returns once the calls that carry
// concurrent Enqueues and Dequeues together have ended: such a call runs
// on for its callers that stay after others left (see the package
// documentation), and it must send nothing once Close returned (a lease
// it took then could not be given back). A call waits no more for a
// refusal to pass once Close began; what the call in flight leased for
// Dequeues that left is still given back (giveBack), riding refusals as
// before Close, and a body it leased that does not decode is still
// buried (bury), so Close waits at most for one call's reply, one
// give-back and one burial per such body, each within OpTimeout (plus
// WaitTimeout with Replicas).
func (q *Queue) Close() error {
	err := q.handle.Close()
	if !errors.Is(err, queue.ErrClosed) { // the first Close
		q.enqs.calls.wait()
		q.leases.calls.wait()
	}
	return err
}

// Open returns a handle on the queue called name in the server rdb talks
// to, creating nothing until the first enqueue. Unless opts.TrustServer is set it first checks that the server
// keeps the durability opts.Sync asks for; it refuses a read-only replica
// and a user the server's ACL refuses a command the queue runs (see the
// package documentation). A ReadOnly handle, which writes nothing, skips
// the checks only a writer needs: it opens on a read-only replica that
// holds this version's library, and needs only the read commands.
func Open(ctx context.Context, rdb redis.UniversalClient, name string, opts *Options) (*Queue, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := o.checkReadTimeout(rdb); err != nil {
		return nil, err
	}
	if err := o.checkRetries(rdb); err != nil {
		return nil, err
	}
	if err := o.checkNodeRetries(ctx, rdb); err != nil {
		return nil, err
	}
	if name == "" || strings.ContainsAny(name, "{}") {
		return nil, fmt.Errorf("%w: redisq: queue name %q is empty or holds a brace", queue.ErrInvalidOptions, name)
	}
	k := newKeys(name)
	q := &Queue{handle: newHandle(rdb, k.all, k.wake, o), name: name}
	q.resends = o.clientResends(ctx, rdb)
	q.types = ackTypes
	if !o.TrustServer && !o.ReadOnly {
		if err := q.checkServer(ctx, o.Sync); err != nil {
			return nil, err
		}
	}
	if err := k.checkLayout(ctx, q.handle, name); err != nil {
		return nil, err
	}
	if err := q.loadAll(ctx, library); err != nil {
		if refusedFor(err, "READONLY") { // a replica whose master has not loaded this version
			return nil, onReplica(err, o.ReadOnly)
		}
		return nil, err
	}
	argv := []any{q.wake, unixMicros(o.Clock.Now()), 0, 0}
	if !o.ReadOnly {
		if err := q.checkWritable(ctx, fnWritable, argv); err != nil {
			return nil, err
		}
	}
	if err := q.checkACL(ctx, fnProbe, argv, o.ReadOnly); err != nil {
		return nil, err
	}
	if err := q.start(ctx, q.sweep); err != nil {
		return nil, err
	}
	return q, nil
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// run runs the library's function f at time now.
func (q *Queue) run(ctx context.Context, f function, now time.Time, args ...any) (any, error) {
	argv := append([]any{q.wake, unixMicros(now), q.o.MaxDeliveries, windowMicros(q.o.DedupWindow)}, args...)
	return q.call(ctx, f, argv)
}

// scriptErr maps a script's error replies onto walq's sentinels: a
// lost key (LOSTSEQ, LOSTKEY) or a counter holding no count (COUNTER,
// scripts/checks.lua: set by hand or by other software; the reply names
// its key, its field and how to mend it) onto queue.ErrCorrupt.
// An error is told by the code its reply starts with (replyAfter), never
// by words found elsewhere in its text: a queue's name in a key that an
// error names, or a producer's id in a DUPLICATE, may hold any words.
func scriptErr(op string, err error) error {
	if err == nil || errors.Is(err, queue.ErrClosed) || errors.Is(err, ErrNotDurable) {
		return err
	}
	if why, ok := replyAfter(err, "KEYTYPE"); ok {
		return fmt.Errorf("%w: redisq: %s: %s", queue.ErrInvalidOptions, op, why)
	}
	for _, code := range []string{"LOSTSEQ", "LOSTKEY", "COUNTER"} {
		if why, ok := replyAfter(err, code); ok {
			return fmt.Errorf("%w: redisq: %s: %s", queue.ErrCorrupt, op, why)
		}
	}
	if why, ok := replyAfter(err, "LAYOUT"); ok {
		return fmt.Errorf("%w: redisq: %s: %s", ErrLayout, op, why)
	}
	if id, ok := replyAfter(err, "DUPLICATE"); ok {
		return fmt.Errorf("%w: %q", queue.ErrDuplicate, id)
	}
	return fmt.Errorf("redisq: %s: %w", op, err)
}

// replyAfter returns the text after code of err's error reply, when the
// reply starts with code (as refusedFor tells).
func replyAfter(err error, code string) (string, bool) {
	var re redis.Error
	if !errors.As(err, &re) || !strings.HasPrefix(re.Error(), code+" ") {
		return "", false
	}
	return strings.TrimPrefix(re.Error(), code+" "), true
}

// toCount reads a delivery count of a script's reply as an int: one past
// what int holds (a count above 2^31-1 where int has 32 bits) reads as
// math.MaxInt, never wrapped to a negative or small count.
func toCount(v any) int { return clampCount(toInt(v)) }

// parseCount reads a delivery count of a stored record, as toCount.
func parseCount(s string) (int, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	return clampCount(n), err
}

// clampCount returns n as an int, math.MaxInt when n is past it.
func clampCount(n int64) int {
	if n > math.MaxInt {
		return math.MaxInt
	}
	return int(n)
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
