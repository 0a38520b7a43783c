package redisq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/walq/walq/queue"
)

// callReq is one call of a handle waiting to go to the server: an Ack
// (ack), an Enqueue (enq) or a lone Dequeue (lease); exactly one is set.
type callReq struct {
	ack   *queue.Receipt
	enq   *enqueueReq
	lease *leaseReq
}

// The kinds of call, in the order a mixed call runs them.
const (
	kindAck = iota
	kindEnqueue
	kindLease
)

// calls are the live calls of one run of runCalls, by kind.
type calls struct {
	acks   []queue.Receipt
	enqs   []enqueueReq
	leases []*leaseReq
	at     [3][]int // the index in the run of each call, by kind, in the order above
}

// runCalls runs concurrent calls of a handle (its coalescer's run) and
// returns each its error. Calls of one kind run as that kind's own call
// (settle, enqueueEach, leaseEach). Calls of more than one kind run in
// one call of the mix function (acks, then enqueues, then leases), which
// costs the server about one call's fixed cost instead of one per kind;
// each caller still gets its own outcome, and one item's failure
// (ErrLeaseLost, a key of the wrong type) fails no other kind's items.
// Enqueues mix cannot carry (an id the producer gave, a delay, more than
// maxPlain of them) run first, in a call of their own. Enqueues and
// Dequeues whose context ended while they waited are left out, with its
// error.
func (q *Queue) runCalls(reqs []callReq) []error {
	errs := make([]error, len(reqs))
	c := sortCalls(reqs, errs)
	if c.mixed() && !plainReqs(c.enqs) {
		c.put(errs, kindEnqueue, q.enqueueEach(c.enqs))
		c.enqs, c.at[kindEnqueue] = nil, nil
	}
	if c.mixed() {
		q.mix(c, errs)
	} else {
		q.separately(c, errs)
	}
	return errs
}

// sortCalls sorts reqs by kind, leaving out the Enqueues and Dequeues
// whose context ended, whose error it sets in errs.
func sortCalls(reqs []callReq, errs []error) *calls {
	c := &calls{}
	for i, r := range reqs {
		switch {
		case r.ack != nil:
			c.acks = append(c.acks, *r.ack)
			c.at[kindAck] = append(c.at[kindAck], i)
		case r.enq != nil && r.enq.ctx.Err() != nil:
			errs[i] = r.enq.ctx.Err()
		case r.enq != nil:
			c.enqs = append(c.enqs, *r.enq)
			c.at[kindEnqueue] = append(c.at[kindEnqueue], i)
		case r.lease.ctx.Err() != nil:
			errs[i] = r.lease.ctx.Err()
		default:
			c.leases = append(c.leases, r.lease)
			c.at[kindLease] = append(c.at[kindLease], i)
		}
	}
	return c
}

// mixed tells whether c holds calls of more than one kind.
func (c *calls) mixed() bool {
	n := 0
	for _, at := range c.at {
		if len(at) > 0 {
			n++
		}
	}
	return n > 1
}

// put sets the errors es of c's calls of kind in errs, the run's.
func (c *calls) put(errs []error, kind int, es []error) {
	for j, i := range c.at[kind] {
		errs[i] = es[j]
	}
}

// plainReqs tells whether Enqueues rs can go in a mixed call, as in a
// call of enqueue1: at most maxPlain, each with a generated id and ready
// at once.
func plainReqs(rs []enqueueReq) bool {
	if len(rs) > maxPlain {
		return false
	}
	for _, r := range rs {
		if r.args[1] != 0 || r.args[2] != "0" {
			return false
		}
	}
	return true
}

// separately runs each kind of c's calls in a call of its own: acks,
// then enqueues, then leases.
func (q *Queue) separately(c *calls, errs []error) {
	if len(c.acks) > 0 {
		c.put(errs, kindAck, q.settle("ack", "", c.acks))
	}
	if len(c.enqs) > 0 {
		c.put(errs, kindEnqueue, q.enqueueEach(c.enqs))
	}
	if len(c.leases) > 0 {
		c.put(errs, kindLease, q.leaseEach(c.leases))
	}
}

// mix runs c's calls in one call of the mix function, under OpTimeout
// (no one caller may cancel the call for the others), and sets each
// one's error in errs. A server past maxmemory refuses the call whole,
// before it runs: then each kind runs on its own, so that acks, which
// may run there, still free memory.
func (q *Queue) mix(c *calls, errs []error) {
	ctx, cancel := q.opContext()
	defer cancel()
	now := q.o.Clock.Now()
	largs := q.leaseArgs(now, len(c.leases))
	v, err := q.call(ctx, fnMix, q.mixArgs(now, c, largs))
	if refusedFor(err, "OOM") {
		q.separately(c, errs)
		return
	}
	parts, err := mixParts(v, err)
	if len(c.acks) > 0 {
		c.put(errs, kindAck, q.mixedAcks(ctx, now, c.acks, parts[kindAck], err))
	}
	if len(c.enqs) > 0 {
		c.put(errs, kindEnqueue, q.mixedEnqueues(ctx, len(c.enqs), parts[kindEnqueue], err))
	}
	if len(c.leases) > 0 {
		c.put(errs, kindLease, q.mixedLeases(ctx, now, c.leases, largs, parts[kindLease], err))
	}
}

// mixArgs returns the arguments of a call of mix at now for c's calls
// (scripts/mix.lua): the time, MaxDeliveries, the window and the lease
// deadline (largs, leaseArgs), the numbers of receipts and messages, a
// pair per receipt and per message, and the leases' tokens.
func (q *Queue) mixArgs(now time.Time, c *calls, largs []any) []any {
	args := make([]any, 0, 6+2*len(c.acks)+2*len(c.enqs)+len(c.leases))
	args = append(args, unixMicros(now), q.o.MaxDeliveries, windowMicros(q.o.DedupWindow), largs[0],
		len(c.acks), len(c.enqs))
	for _, r := range c.acks {
		args = append(args, strconv.FormatUint(r.Seq, 10), strconv.FormatUint(r.Lease, 10))
	}
	for _, r := range c.enqs {
		args = append(args, r.args[0], r.args[3])
	}
	return append(args, largs[2:]...)
}

// mixParts splits the reply v, err of a call of mix into its three
// parts, with the call's error: none when the call failed (err), and an
// error for a reply that is not three parts.
func mixParts(v any, err error) ([3]any, error) {
	var parts [3]any
	if !replied(v, err) {
		return parts, err
	}
	r, ok := v.([]any)
	if !ok || len(r) != len(parts) {
		return parts, fmt.Errorf("redisq: mix: unexpected reply %v", v)
	}
	copy(parts[:], r)
	return parts, err
}

// part returns one part of a mixed call's reply, pv, with the call's
// error, as the reply and error of a call of that part's own function:
// an error reply of the part is its error (naming a key of the wrong
// type, as call does).
func (q *Queue) part(ctx context.Context, pv any, err error) (any, error) {
	var re redis.Error
	if e, ok := pv.(error); ok && errors.As(e, &re) {
		return nil, q.wrongType(ctx, e)
	}
	return pv, err
}

// mixedAcks returns the errors of the acks rs of a mixed call at now,
// given their part of its reply: as after a call of ack1, a reply of
// -3 (a message a producer named, nothing written) sends them to settle.
func (q *Queue) mixedAcks(ctx context.Context, now time.Time, rs []queue.Receipt, pv any, err error) []error {
	v, err := q.part(ctx, pv, err)
	if !replied(v, err) {
		return settleErrs(rs, nil, scriptErr("ack", err))
	}
	codes, cerr := ack1Codes(v, len(rs))
	if cerr != nil {
		return settleErrs(rs, nil, cerr)
	}
	if codes == nil {
		codes, err = q.runSettle(now, "ack", receiptArgs("ack", "", rs))
	}
	return settleErrs(rs, codes, err)
}

// mixedEnqueues returns the errors of the n enqueues of a mixed call,
// given their part of its reply: 1 when all were enqueued, as enqueue1
// replies.
func (q *Queue) mixedEnqueues(ctx context.Context, n int, pv any, err error) []error {
	v, err := q.part(ctx, pv, err)
	if !replied(v, err) {
		err = scriptErr("enqueue", err)
	} else if c, ok := v.(int64); !ok || c != 1 {
		err = fmt.Errorf("redisq: enqueue: unexpected reply %v", v)
	}
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// mixedLeases gives the Dequeues reqs of a mixed call at now, whose
// arguments were largs (leaseArgs), their messages from their part of
// its reply, as leaseEach gives them from a call of lease1: a reply of
// -3 sends them to dequeue, and when the call buried messages and leased
// too few, the handle calls again for the rest. It returns their errors.
func (q *Queue) mixedLeases(ctx context.Context, now time.Time, reqs []*leaseReq, largs []any, pv any, err error) []error {
	v, err := q.part(ctx, pv, err)
	v, err = q.afterLease1(ctx, now, largs, v, err)
	ms, due, buried, err := q.leaseReply(largs, now, v, err)
	if n := len(reqs); err == nil && len(ms) < n && buried > 0 {
		more, d, merr := q.lease(ctx, n-len(ms), true)
		ms, due, err = append(ms, more...), d, merr
	}
	errs := make([]error, len(reqs))
	live := make([]int, len(reqs))
	for i := range live {
		live[i] = i
	}
	give(reqs, live, ms, due, err, errs)
	return errs
}
