package redisq

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/walq/walq/queue"
)

// Dequeue returns the next ready message, leased to the caller for
// Options.AckTimeout. It blocks until a message is ready, ctx ends or the
// handle is closed; it waits on the handle's subscription, never polls,
// and holds no connection while it waits.
func (q *Queue) Dequeue(ctx context.Context) (*queue.Message, error) {
	ms, err := q.dequeue(ctx, 1, true)
	if err != nil {
		return nil, err
	}
	return ms[0], nil
}

// TryDequeue is Dequeue without waiting: ErrEmpty at once when no message
// is ready.
func (q *Queue) TryDequeue() (*queue.Message, error) {
	ctx, cancel := q.opContext()
	defer cancel()
	ms, err := q.dequeue(ctx, 1, false)
	if err != nil {
		return nil, err
	}
	return ms[0], nil
}

// DequeueBatch leases up to max ready messages, blocking until at least
// one is ready, ctx ends or the handle is closed.
func (q *Queue) DequeueBatch(ctx context.Context, max int) (queue.Messages, error) {
	return q.dequeue(ctx, max, true)
}

func (q *Queue) dequeue(ctx context.Context, max int, block bool) ([]*queue.Message, error) {
	if max <= 0 {
		return nil, fmt.Errorf("%w: dequeue of %d messages", queue.ErrInvalidOptions, max)
	}
	chain := false // woken by a wake-up: it wakes the next waiter on its way out
	for {
		if err := ctx.Err(); err != nil {
			if chain { // the run's one announcement must not end here
				q.ready.notifyOne()
			}
			return nil, err
		}
		woken := q.ready.register()
		ms, due, err := q.leaseMany(ctx, max)
		if err != nil || len(ms) > 0 || !block {
			// A wake-up received on the way out is passed on: more may be
			// ready, or it came after this call looked. A woken caller
			// that leased, or failed, wakes the next: the server announces
			// a run of enqueues once (scripts/common.lua, announce), and
			// a look that failed may not have ended the run.
			q.pass(woken)
			if chain && (len(ms) > 0 || err != nil) {
				q.ready.notifyOne()
			}
			if err == nil && len(ms) == 0 {
				err = queue.ErrEmpty
			}
			return ms, err
		}
		var timer <-chan time.Time
		if !due.IsZero() {
			timer = q.o.Clock.After(due.Sub(q.o.Clock.Now()))
		}
		select {
		case <-ctx.Done():
			q.pass(woken)
			return nil, ctx.Err()
		case <-q.closed:
			return nil, queue.ErrClosed
		case <-woken:
			chain = true
		case <-timer:
			q.pass(woken)
		}
	}
}

// leaseMany leases up to max messages: a batch in a call of its own, one
// message together with the other lone Dequeues of the handle running
// at the same time.
func (q *Queue) leaseMany(ctx context.Context, max int) ([]*queue.Message, time.Time, error) {
	if max > 1 {
		ms, due, err := q.lease(ctx, max, false)
		if len(ms) > 0 {
			// Leased messages are the caller's: those the failed call
			// left out come back when their lease runs out.
			err = nil
		}
		return ms, due, err
	}
	r := &leaseReq{p: newPresence(ctx)}
	if err := q.leases.doCtx(ctx, r, q.leaseEach, leaveLease); err != nil {
		return nil, time.Time{}, err
	}
	if r.m == nil {
		return nil, r.due, nil
	}
	return []*queue.Message{r.m}, r.due, nil
}

// leaseReq is a lone Dequeue waiting for the call that leases for it.
type leaseReq struct {
	p   *presence      // the caller's context, and whether it is still there; guards m and due
	m   *queue.Message // leased for it; nil when none was ready
	due time.Time      // with none: when the earliest delayed message is due, if known
}

func leasePresence(r *leaseReq) *presence { return r.p }

// leaveLease is what a lone Dequeue whose context ended with err while a
// call carried it returns: nil when the call already leased it a message
// (the caller takes it), else err; a message leased for it later is
// given back (leaseEach).
func leaveLease(r *leaseReq, err error) error {
	r.p.leave()
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	if r.m != nil {
		return nil
	}
	return err
}

// leaseEach leases one message each for concurrent lone Dequeues in one
// call, in the order they came, as far as messages are ready; those that
// get none wait for a wake-up. It runs under OpTimeout (no one caller
// may cancel the call for the others), for the Dequeues whose callers
// are still there, and rides the server's refusals itself (rideMoves),
// so that each send again leaves out those that left meanwhile. A
// message leased for a caller that left meanwhile is given back, not
// counted as a delivery (giveBack; should that fail, its lease runs
// out), and delivered again. A lone Dequeue runs under its own context.
func (q *Queue) leaseEach(reqs []*leaseReq) []error {
	if len(reqs) == 1 {
		return []error{q.leaseFor(reqs)}
	}
	ctx, cancel := q.opContext()
	defer cancel()
	var sent []int // index in reqs of each request in the last send
	var ms []*queue.Message
	var due time.Time
	var lerr error // the last send's error
	_, err := q.rideMoves(ctx, func(ctx context.Context) (any, error) {
		sent = takeLive(reqs, leasePresence)
		if len(sent) == 0 {
			return nil, nil
		}
		ms, due, lerr = q.lease(ridden(ctx), len(sent), true)
		if len(ms) > 0 { // leased: the messages are the callers', whatever came after
			return nil, nil
		}
		unsend(reqs, sent, q.unrun(lerr), leasePresence)
		return nil, lerr
	})
	if len(ms) > 0 {
		err = lerr // for the callers the call leased nothing for
	}
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		errs[i] = r.p.ctx.Err() // left out of the last send
	}
	var back []queue.Receipt // leased for callers that left
	for j, i := range sent {
		errs[i] = nil
		if j < len(ms) {
			if reqs[i].p.gone(func() { reqs[i].m = ms[j] }) {
				back = append(back, ms[j].Receipt)
			}
			continue
		}
		reqs[i].p.gone(func() { reqs[i].due = due })
		errs[i] = err
	}
	q.giveBack(back)
	return errs
}

// leaseFor leases for a lone Dequeue (reqs[0]) under its own context.
func (q *Queue) leaseFor(reqs []*leaseReq) error {
	r := reqs[0]
	if err := r.p.ctx.Err(); err != nil {
		return err
	}
	ms, due, err := q.lease(r.p.ctx, 1, true)
	if len(ms) > 0 {
		r.m = ms[0]
		return nil
	}
	r.due = due
	return err
}

// giveBack makes the messages of the deliveries rs ready again at once,
// where a nacked message goes: they were leased for callers that had
// left, so no consumer got them, and the settle function's release takes
// their delivery back (it counts neither towards MaxDeliveries nor in
// Stats' Delivered or Nacked). It runs in the grouped call that leased
// them, which Close waits for, so it runs even once Close began
// (awaited), and Close returns after it. Should it fail, that is logged
// (Options.Logger), and the messages are delivered again once their
// leases run out, which counts that delivery as a lease that ran out
// does.
func (q *Queue) giveBack(rs []queue.Receipt) {
	if len(rs) == 0 {
		return
	}
	now := q.o.Clock.Now()
	for i, err := range q.settleIn(awaited(context.Background()), now, "release", "", rs) {
		if err != nil && !errors.Is(err, ErrNotDurable) && q.o.Logger != nil {
			q.o.Logger.Warn("redisq: a lease taken for a Dequeue that left was not given back; it runs out",
				"seq", rs[i].Seq, "err", err)
		}
	}
}

// leaseTokens is the most messages one call of the dequeue function
// leases: each takes a lease token the client draws and sends, so a
// DequeueBatch of a larger max (math.MaxInt: everything ready) calls
// again while a call leased that many, instead of drawing a token per
// message max allows.
const leaseTokens = 1000

// lease runs the dequeue script, for up to leaseTokens messages a call;
// gathered lone Dequeues (gathered) run lease1 first (see leaseCall).
// With nothing ready it returns the time the earliest delayed message is
// due (zero when none). A leased message whose body does not decode goes
// to the dead-letter set (see bury in scripts/common.lua), and as many
// more are leased in its place; the script does the same with the
// messages it meets that had MaxDeliveries (killAtLimit), at most
// BURIES per call. A call that fails after others leased ends the loop
// with both the messages leased and its error: the server holds those
// messages leased, so they must reach the caller.
func (q *Queue) lease(ctx context.Context, max int, gathered bool) ([]*queue.Message, time.Time, error) {
	var out []*queue.Message
	for {
		if err := ctx.Err(); err != nil { // the call leases past ctx: see leaseContext
			return out, time.Time{}, err
		}
		n := min(max-len(out), leaseTokens)
		ms, due, buried, err := q.leaseOnce(ctx, n, gathered)
		out = append(out, ms...)
		if err != nil || len(out) == max || buried == 0 && len(ms) < n {
			return out, due, err
		}
	}
}

// leaseOnce is one call of the dequeue script for up to max messages; it
// returns the messages leased and how many of them it buried instead. A
// body whose dead-lettering fails stays leased: when its lease runs out it
// is ready again and the dequeue that leases it next buries it (or, at
// MaxDeliveries, the expiry makes it dead with the usual reason); the
// others are returned with that error. A call whose WAIT fell short
// (ErrNotDurable) leased what it replies, and reports nothing else: its
// messages are returned, and with none the call found none (ErrEmpty, or
// a blocking Dequeue waits). A lease the replicas lack is at worst lost
// in a failover, and the message delivered again.
func (q *Queue) leaseOnce(ctx context.Context, max int, gathered bool) ([]*queue.Message, time.Time, int, error) {
	now := q.o.Clock.Now()
	args := q.leaseArgs(now, max)
	cctx, cancel := q.leaseContext(ctx)
	v, err := q.leaseCall(cctx, now, args, gathered)
	cancel()
	if !replied(v, err) {
		return nil, time.Time{}, 0, scriptErr("dequeue", err)
	}
	reply, _ := v.([]any)
	if len(reply) == 0 {
		return nil, time.Time{}, 0, fmt.Errorf("redisq: dequeue: unexpected reply %v", v)
	}
	var due time.Time
	buried := 0
	switch hint := toInt(reply[0]); {
	case hint >= 0:
		due = time.UnixMicro(hint)
	case hint == -2: // the script buried its most damaged records: call again
		buried++
	}
	out := make([]*queue.Message, 0, (len(reply)-1)/3)
	var failed error // not ErrNotDurable: a lease is the caller's, replicated or not
	for i := 1; i+2 < len(reply); i += 3 {
		tok, _ := strconv.ParseUint(args[2+(i-1)/3].(string), 10, 64)
		r := queue.Receipt{Seq: uint64(toInt(reply[i])), Lease: tok}
		m, err := decodeMessage(reply[i+2], r)
		if err != nil {
			err := q.bury(ctx, r, "payload undecodable: "+err.Error())
			if err != nil && !errors.Is(err, ErrNotDurable) { // ErrNotDurable: it was buried
				failed = fmt.Errorf("redisq: message %d: dead-letter its undecodable body: %w", r.Seq, err)
				continue
			}
			buried++
			continue
		}
		m.DeliveredAt, m.Deliveries = now, toCount(reply[i+1])
		out = append(out, queue.NewMessage(q, *m))
	}
	return out, due, buried, failed
}

// bury dead-letters the leased message of r, whose body does not decode,
// as a corrupt record. Under a grouped Dequeues' call (ctx ridden, see
// leaseEach), which Close waits for, it runs even once Close began
// (awaited), as giveBack does: else the body stayed leased until its
// lease ran out, which counts a delivery.
func (q *Queue) bury(ctx context.Context, r queue.Receipt, why string) error {
	sctx := context.Background()
	if ctx.Value(rideOnceKey{}) != nil {
		sctx = awaited(sctx)
	}
	return q.settleIn(sctx, q.o.Clock.Now(), "corrupt", corruptReason+why, []queue.Receipt{r})[0]
}

// leaseCall runs the dequeue function with args (leaseArgs) at now and
// returns its reply; one message, or the messages of gathered lone
// Dequeues, go to the lease1 function, which the server runs for less
// (four keys and one argument per message besides three; its reply of
// one leased message, one string, is returned as dequeue's), and to
// dequeue only when lease1 answers -3: a message it popped must be buried
// or killed, which lease1's call carries no keys for.
func (q *Queue) leaseCall(ctx context.Context, now time.Time, args []any, gathered bool) (any, error) {
	if args[1] == 1 || gathered {
		v, err := q.call(ctx, fnLease1, q.lease1Args(now, args))
		if s, ok := v.(string); ok && replied(v, err) {
			r, perr := leased(s)
			if perr != nil {
				return nil, perr
			}
			return r, err
		}
		if r, _ := v.([]any); !replied(v, err) || len(r) != 1 || toInt(r[0]) != -3 {
			return v, err
		}
	}
	return q.run(ctx, fnDequeue, now, args...)
}

// lease1Args returns the arguments of lease1 for a call at now of
// dequeue's (args, leaseArgs): now, MaxDeliveries, the lease deadline and
// the tokens.
func (q *Queue) lease1Args(now time.Time, args []any) []any {
	out := make([]any, 0, 1+len(args))
	out = append(out, unixMicros(now), q.o.MaxDeliveries, args[0])
	return append(out, args[2:]...)
}

// leased reads lease1's reply of a leased message, seq ':' deliveries ':'
// body, as dequeue's: {-1, seq, deliveries, body}.
func leased(s string) (any, error) {
	seq, rest, ok1 := strings.Cut(s, ":")
	d, body, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("redisq: dequeue: unexpected reply %q", s)
	}
	return []any{int64(-1), seq, d, body}, nil
}

// leaseArgs returns the dequeue function's own arguments for a call at
// now for up to max messages: the lease deadline (µs, rounded up), max,
// and a fresh token per message.
func (q *Queue) leaseArgs(now time.Time, max int) []any {
	args := make([]any, 0, 2+max)
	args = append(args, strconv.FormatInt(ceilMicros(now.Add(q.o.AckTimeout)), 10), max)
	for range max {
		args = append(args, strconv.FormatUint(newToken(), 10))
	}
	return args
}

// corruptReason starts the reason of a message dead-lettered because its
// stored record or body cannot be read (scripts/common.lua, bury).
const corruptReason = "corrupt record: "

func decodeMessage(raw any, r queue.Receipt) (*queue.Message, error) {
	s, _ := raw.(string)
	var b body
	if err := unmarshalStored(s, &b); err != nil {
		return nil, fmt.Errorf("redisq: message %d: decode: %w", r.Seq, err)
	}
	return &queue.Message{ID: b.ID, Payload: b.Payload, Headers: b.Headers,
		EnqueuedAt: time.Unix(0, b.At), Receipt: r}, nil
}

// newToken returns a random non-zero lease token: a receipt of one
// delivery cannot name another, even after a failover reissued a Seq.
func newToken() uint64 {
	for {
		if t := rand.Uint64(); t != 0 {
			return t
		}
	}
}
