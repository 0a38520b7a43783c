package redisq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/walq/walq/internal/msgid"
	"github.com/walq/walq/queue"
)

// body is a message as stored in the body hash; only clients read it.
type body struct {
	_msgpack struct{} `msgpack:",as_array"` //nolint:unused // msgpack's layout tag

	ID      string            // message id
	At      int64             // enqueue time, Unix nanoseconds
	Headers map[string]string // nil when none
	Payload []byte            // the message body
}

// Enqueue adds a message and returns its id. It returns once the server
// has run the enqueue (and, with Replicas, once the replicas have it; an
// ErrNotDurable comes with the id, as the message was enqueued).
// Concurrent Enqueues of one handle go to the server together in one
// call; each succeeds or fails (ErrDuplicate) on its own. One sent
// together with others whose context ends returns at once: with the
// context's error when its message went in no call the server may have
// run, else with ErrMayHaveRun and the id (the message may be enqueued;
// an enqueue sent again should name the id, WithID). One sent alone
// waits for its reply as long as the client does (go-redis: its
// ReadTimeout, or the context's deadline with ContextTimeoutEnabled),
// and returns ErrMayHaveRun and the id as well when its context ended
// and the client stopped waiting (sentAlone).
func (q *Queue) Enqueue(ctx context.Context, payload []byte, opts ...queue.EnqueueOption) (string, error) {
	if q.isClosed() {
		return "", queue.ErrClosed
	}
	it := queue.Item{Payload: payload}
	for _, o := range opts {
		o(&it)
	}
	now := q.o.Clock.Now()
	args, err := q.itemArgs(now, &it)
	if err != nil {
		return "", err
	}
	req := enqueueReq{p: newPresence(ctx), now: now, args: args}
	err = q.enqs.doCtx(ctx, req, q.enqueueEach, leaveEnqueue)
	if err != nil && !errors.Is(err, ErrNotDurable) && !errors.Is(err, ErrMayHaveRun) {
		return "", err // not durable, or may have run: the id may be the queue's
	}
	return it.ID, err
}

// enqueueReq is one Enqueue waiting to go to the server.
type enqueueReq struct {
	p    *presence // the caller's context, and whether it is still there
	now  time.Time
	args [4]any // id, producer, due, body
}

func enqueuePresence(r enqueueReq) *presence { return r.p }

// leaveEnqueue is what an Enqueue whose context ended with err while a
// call carried it returns: err alone if the server refused whatever
// carried it (or it was never sent), else ErrMayHaveRun.
func leaveEnqueue(r enqueueReq, err error) error {
	if r.p.leave() {
		return fmt.Errorf("%w: %w", ErrMayHaveRun, err)
	}
	return err
}

// enqueueEach runs concurrent Enqueues in one call ('each': a duplicate
// fails alone), under OpTimeout: no one caller may cancel the call for
// the others. It sends only the Enqueues whose callers are still there,
// and rides the server's refusals itself (rideMoves), so that each send
// again leaves out those that left meanwhile. A lone Enqueue runs as a
// batch of one, under its own context (see sentAlone).
func (q *Queue) enqueueEach(reqs []enqueueReq) []error {
	if len(reqs) == 1 {
		_, err := q.enqueue(reqs[0].p.ctx, reqs[0].now, "all", reqs[0].args[:]...)
		return []error{q.sentAlone(reqs[0].p.ctx, err)}
	}
	ctx, cancel := q.opContext()
	defer cancel()
	now := reqs[0].now
	var sent []int // index in reqs of each item in the last send
	var codes []int64
	_, err := q.rideMoves(ctx, func(ctx context.Context) (any, error) {
		sent = takeLive(reqs, enqueuePresence)
		if len(sent) == 0 {
			return nil, nil
		}
		args := make([]any, 0, 4*len(sent))
		for _, i := range sent {
			args = append(args, reqs[i].args[:]...)
		}
		var err error
		codes, err = q.enqueue(ridden(ctx), now, "each", args...)
		unsend(reqs, sent, q.unrun(err), enqueuePresence)
		return nil, err
	})
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		errs[i] = r.p.ctx.Err() // left out of the last send: refused or never sent
	}
	for j, i := range sent {
		switch {
		case codes != nil && codes[j] != 1: // refused, whatever the WAIT after it
			errs[i] = fmt.Errorf("%w: %q", queue.ErrDuplicate, reqs[i].args[0])
		default:
			errs[i] = err
		}
	}
	return errs
}

// takeLive returns the indexes in reqs of the callers still there
// (presence.take), marked as sent, for the next send to carry.
func takeLive[T any](reqs []T, p func(T) *presence) []int {
	var sent []int
	for i, r := range reqs {
		if p(r).take() {
			sent = append(sent, i)
		}
	}
	return sent
}

// unsend marks the callers of a send (sent, indexes in reqs) as not sent
// when it did not run (unrun: refused, or never sent): nothing of theirs
// ran.
func unsend[T any](reqs []T, sent []int, unrun bool, p func(T) *presence) {
	if unrun {
		for _, i := range sent {
			p(reqs[i]).back()
		}
	}
}

// EnqueueBatch adds the items in order in one call and returns their
// ids. If any id is a duplicate (ErrDuplicate) or any item is invalid,
// none is enqueued; the batch is all or nothing, also across a crash of
// the server. It waits for its reply as a lone Enqueue does, and returns
// ErrMayHaveRun with the ids when its context ended and the client
// stopped waiting (sentAlone): all of the batch or none may be enqueued.
func (q *Queue) EnqueueBatch(ctx context.Context, items []queue.Item) ([]string, error) {
	if len(items) == 0 {
		return nil, nil
	}
	now := q.o.Clock.Now()
	args := make([]any, 0, 4*len(items))
	ids := make([]string, len(items))
	for i := range items {
		it := items[i]
		a, err := q.itemArgs(now, &it)
		if err != nil {
			return nil, err
		}
		ids[i] = it.ID
		args = append(args, a[:]...)
	}
	_, err := q.enqueue(ctx, now, "all", args...)
	err = q.sentAlone(ctx, err)
	// Not durable, or may have run: the ids may be the queue's.
	if err != nil && !errors.Is(err, ErrNotDurable) && !errors.Is(err, ErrMayHaveRun) {
		return nil, err
	}
	return ids, err
}

// enqueue runs the enqueue function in mode ('all' or 'each') over items,
// four arguments each, and returns its code per item (with ErrNotDurable
// when only the WAIT after the call failed). Up to 128 items,
// all with generated ids and ready at once, go to the enqueue1 function
// (enqueue1w with a DedupWindow), which the server runs for less: no
// generated id is checked, so both modes are the same there.
func (q *Queue) enqueue(ctx context.Context, now time.Time, mode string, items ...any) ([]int64, error) {
	n := len(items) / 4
	if plain(items) {
		return q.enqueue1(ctx, now, items)
	}
	v, err := q.run(ctx, fnEnqueue, now, append([]any{mode, n}, items...)...)
	if !replied(v, err) {
		return nil, scriptErr("enqueue", err)
	}
	reply, _ := v.([]any)
	if len(reply) != n {
		return nil, fmt.Errorf("redisq: enqueue: unexpected reply %v", v)
	}
	codes := make([]int64, n)
	for i, c := range reply {
		codes[i] = toInt(c)
	}
	return codes, err
}

// maxPlain is the most items a call of enqueue1 carries.
const maxPlain = 128

// plain tells whether items (enqueue's) go to enqueue1: at most maxPlain
// of them, each with a generated id and ready at once.
func plain(items []any) bool {
	if len(items) == 0 || len(items) > 4*maxPlain {
		return false
	}
	for i := 0; i < len(items); i += 4 {
		if items[i+1] != 0 || items[i+2] != "0" {
			return false
		}
	}
	return true
}

// enqueue1 enqueues plain items with the enqueue1 function, whose
// arguments are each item's id and body, after now and the window with
// one (enqueue1w); its reply 1 says all were enqueued.
func (q *Queue) enqueue1(ctx context.Context, now time.Time, items []any) ([]int64, error) {
	n := len(items) / 4
	args := make([]any, 0, 2+2*n)
	f := fnEnqueue1
	if q.o.DedupWindow > 0 {
		f = fnEnqueue1W
		args = append(args, unixMicros(now), windowMicros(q.o.DedupWindow))
	}
	for i := 0; i < len(items); i += 4 {
		args = append(args, items[i], items[i+3])
	}
	v, err := q.call(ctx, f, args)
	if err != nil {
		return nil, scriptErr("enqueue", err)
	}
	if c, ok := v.(int64); !ok || c != 1 {
		return nil, fmt.Errorf("redisq: enqueue: unexpected reply %v", v)
	}
	codes := make([]int64, n)
	for i := range codes {
		codes[i] = 1
	}
	return codes, nil
}

// itemArgs checks an item and returns its arguments of the enqueue
// function: id, producer (1 when the caller gave the id), due time (0:
// now) and body. It fills in a generated id.
func (q *Queue) itemArgs(now time.Time, it *queue.Item) ([4]any, error) {
	if len(it.Payload) > q.o.MaxMessageSize {
		return [4]any{}, fmt.Errorf("%w: %d bytes, limit %d", queue.ErrTooLarge, len(it.Payload), q.o.MaxMessageSize)
	}
	producer := 1
	if it.ID == "" {
		it.ID, producer = msgid.New(), 0
	}
	due := it.DeliverAt
	if it.Delay > 0 {
		due = now.Add(it.Delay)
	}
	dueArg := "0"
	if due.After(now) {
		dueArg = dueMicros(due)
	}
	headers := it.Headers
	if len(headers) == 0 {
		headers = nil
	}
	b, err := msgpack.Marshal(&body{ID: it.ID, At: now.UnixNano(), Headers: headers, Payload: it.Payload})
	if err != nil {
		return [4]any{}, fmt.Errorf("redisq: encode message: %w", err)
	}
	return [4]any{it.ID, producer, dueArg, b}, nil
}
