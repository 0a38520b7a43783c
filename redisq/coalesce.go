package redisq

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
)

// coalescer gathers concurrent calls of one kind (Acks, Enqueues, lone
// Dequeues) and runs one server call of them at a time: a caller that
// finds none running yields the processor once, so that callers ready to
// run (woken by the same server reply) queue behind it, and runs its own
// with theirs; the others queue, and the caller whose call returns hands
// what queued to the oldest queued caller, which runs it, with what
// queued until it ran (up to maxCoalesce items in all), as one call and
// hands on in turn. The Redis counterpart of a group commit: one server
// call and one fsync for many, and no caller serves others' batches
// before it returns its own result. A call of run that panics panics in
// every caller whose item it carried, and the callers queued behind it
// are served.
type coalescer[T any] struct {
	mu      sync.Mutex
	pending []*coalesced[T] // queued, not yet sent; empty unless busy
	busy    bool            // a caller is running a call
	calls   running         // the calls of several items under way (doCtx)
}

// running counts the calls of several items a coalescer runs, in
// goroutines of their own, which may outlive their callers, or in the
// goroutine of a caller whose context never ends (doCtx), so that the
// handle's Close can wait for them (wait) and none sends anything after
// Close returned.
type running struct {
	mu   sync.Mutex
	n    int        // calls under way
	idle *sync.Cond // on mu, signalled when n falls to 0; made by wait
}

func (r *running) add() {
	r.mu.Lock()
	r.n++
	r.mu.Unlock()
}

func (r *running) done() {
	r.mu.Lock()
	r.n--
	if r.n == 0 && r.idle != nil {
		r.idle.Broadcast()
	}
	r.mu.Unlock()
}

// wait returns once no call is under way.
func (r *running) wait() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.idle == nil {
		r.idle = sync.NewCond(&r.mu)
	}
	for r.n > 0 {
		r.idle.Wait()
	}
}

// maxCoalesce is the most items one call carries.
const maxCoalesce = 512

type coalesced[T any] struct {
	v        T
	err      error
	panicked any             // what the call of run that carried v panicked with, if it did
	batch    []*coalesced[T] // set under the coalescer's mu, before done is closed, when this caller is to run them
	done     chan struct{}   // closed once batch is set for this caller to run
	out      chan struct{}   // closed once err or panicked is set
}

// do queues v and returns its error once a call of run, given v among
// others, has returned; run returns one error per item. If that call
// panics, do panics with the same value.
func (c *coalescer[T]) do(v T, run func([]T) []error) error {
	return c.doCtx(nil, v, run, nil)
}

// doCtx is do for a caller with a context. While v waits for the call
// ahead of it (which may take until OpTimeout, sending again what the
// server refused), ctx's end takes v back and returns ctx's error, as no
// call has carried v. A call of several items runs in a goroutine of its
// own, so that its callers need not wait for it: once a call carries v,
// ctx's end returns leave(v, ctx's error), which says what v's caller
// may know of it (run must then leave v out of what it sends next, see
// presence); with leave nil the caller waits for the call's outcome. A
// call of v alone runs in the caller's goroutine, under the caller's own
// context, as does one whose caller cannot leave (leave nil, or a ctx
// that never ends, such as context.Background); a call of several items
// is counted in calls wherever it runs.
func (c *coalescer[T]) doCtx(ctx context.Context, v T, run func([]T) []error, leave func(T, error) error) error {
	req := &coalesced[T]{v: v, done: make(chan struct{}), out: make(chan struct{})}
	var end <-chan struct{}
	if ctx != nil && leave != nil {
		end = ctx.Done()
	}
	c.mu.Lock()
	if !c.busy {
		c.busy = true
		c.mu.Unlock()
		// A yield, not a wait: it costs nothing when no other goroutine
		// is ready to run, and callers woken together (their calls
		// answered in one pass of the server's event loop) then go in
		// one call instead of one after the other.
		runtime.Gosched()
		req.batch = []*coalesced[T]{req}
	} else {
		c.pending = append(c.pending, req)
		c.mu.Unlock()
		if err, left := c.await(ctx, req, end, leave); left {
			return err
		}
		if req.batch == nil { // run by another caller
			return req.result()
		}
	}
	c.gather(req)
	if len(req.batch) == 1 || end == nil {
		if len(req.batch) > 1 { // others' items too: Close waits for it
			c.calls.add()
			defer c.calls.done()
		}
		defer c.handOn()
		req.runBatch(run, true)
		return req.err
	}
	c.calls.add()
	go func() {
		defer c.calls.done()
		defer c.handOn()
		req.runBatch(run, false)
	}()
	return c.wait(ctx, req, end, leave)
}

// await waits while req is queued: until a call carries it and has its
// outcome, or it is handed a batch to run (req.batch), or ctx ends (end):
// then it reports left, with ctx's error if req was still queued (no
// call carried it), else what leave says, unless req has its outcome or
// was handed a batch meanwhile. With no end (nil) it waits for the
// outcome, or for a batch to run.
func (c *coalescer[T]) await(ctx context.Context, req *coalesced[T], end <-chan struct{}, leave func(T, error) error) (error, bool) {
	if ctx != nil && end == nil && leave == nil {
		end = ctx.Done() // queued: withdrawn at ctx's end, else waits for the outcome
	}
	select {
	case <-req.done:
		return nil, false
	case <-req.out:
		return nil, false
	case <-end:
	}
	switch c.withdraw(req) {
	case withdrawn:
		return ctx.Err(), true
	case handed:
		<-req.done
		return nil, false
	}
	if leave == nil {
		<-req.out
		return nil, false
	}
	select {
	case <-req.out:
		return nil, false
	default:
		return leave(req.v, ctx.Err()), true
	}
}

// wait waits for the outcome of the call that carries req, or for ctx's
// end (end), when it returns what leave says unless the outcome came.
func (c *coalescer[T]) wait(ctx context.Context, req *coalesced[T], end <-chan struct{}, leave func(T, error) error) error {
	select {
	case <-req.out:
		return req.result()
	case <-end:
	}
	select {
	case <-req.out:
		return req.result()
	default:
		return leave(req.v, ctx.Err())
	}
}

// result is req's outcome, once out is closed: its error, or the panic
// of the call that carried it, panicking on in its caller.
func (req *coalesced[T]) result() error {
	if req.panicked != nil {
		panic(req.panicked)
	}
	return req.err
}

// Where withdraw found a queued caller.
const (
	withdrawn = iota // still queued: taken out, no call carried it
	handed           // handed a batch to run
	carried          // in a batch another caller runs
)

// withdraw takes req out of the queue if it is still there, and tells
// where it found it (gather and handOn take callers out under mu, and
// handOn hands the batch under mu too).
func (c *coalescer[T]) withdraw(req *coalesced[T]) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.pending, req)
	switch {
	case i >= 0:
		c.pending = slices.Delete(c.pending, i, i+1)
		return withdrawn
	case req.batch != nil:
		return handed
	}
	return carried
}

// gather adds to req's batch the callers queued since it was made, in
// the order they came, up to maxCoalesce items in all.
func (c *coalescer[T]) gather(req *coalesced[T]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(len(c.pending), maxCoalesce-len(req.batch))
	if n == 0 {
		return
	}
	// Clipped: a batch handOn made shares its array with pending.
	req.batch = append(slices.Clip(req.batch), c.pending[:n]...)
	c.pending = c.pending[n:]
}

// runBatch runs the batch handed to req, and gives each of its callers
// its outcome; if run panics, it panics on here only when rethrow is set
// (a call run in a goroutine of its own gives the panic to its callers
// alone).
func (req *coalesced[T]) runBatch(run func([]T) []error, rethrow bool) {
	vs := make([]T, len(req.batch))
	for i, b := range req.batch {
		vs[i] = b.v
	}
	var errs []error
	defer req.finish(&errs, rethrow)
	errs = run(vs)
	if len(errs) != len(vs) {
		panic(fmt.Sprintf("redisq: a coalesced call of %d items returned %d errors", len(vs), len(errs)))
	}
}

// finish gives every caller of req's batch its error from errs, or what
// run panicked with, waking them, and panics on if run did and rethrow
// is set. Deferred by runBatch, for its recover.
func (req *coalesced[T]) finish(errs *[]error, rethrow bool) {
	p := recover()
	for i, b := range req.batch {
		if p != nil {
			b.panicked = p
		} else {
			b.err = (*errs)[i]
		}
		close(b.out)
	}
	if p != nil && rethrow {
		panic(p)
	}
}

// handOn hands what queued to the oldest queued caller to run, or marks
// the coalescer idle when nothing did.
func (c *coalescer[T]) handOn() {
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.busy = false
		c.mu.Unlock()
		return
	}
	batch := c.pending[:min(len(c.pending), maxCoalesce)]
	c.pending = c.pending[len(batch):]
	batch[0].batch = batch
	c.mu.Unlock()
	close(batch[0].done)
}

// presence is a grouped caller's standing in the call that carries its
// item (doCtx's leave), shared by the caller and the goroutine running
// the call, which asks take before each send and back after a refusal.
type presence struct {
	ctx context.Context // the caller's

	mu   sync.Mutex
	left bool // the caller returned: its item goes in no later send
	sent bool // its item is in a send whose outcome is not known to be a refusal
}

func newPresence(ctx context.Context) *presence { return &presence{ctx: ctx} }

// take reports whether the item goes in the next send: its caller is
// still there and its context lives; it is then marked sent.
func (p *presence) take() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.left || p.ctx.Err() != nil {
		return false
	}
	p.sent = true
	return true
}

// back marks the item as not sent: the server refused the send that
// carried it, so it ran nothing.
func (p *presence) back() {
	p.mu.Lock()
	p.sent = false
	p.mu.Unlock()
}

// leave marks the caller gone, its context having ended, and reports whether its item may have run: it is in a send whose outcome
// is not known, or was given one.
func (p *presence) leave() (mayHaveRun bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.left = true
	return p.sent
}

// gone reports whether the caller left, and if not runs f under p's
// lock, so that the caller, leaving after, finds what f set.
func (p *presence) gone(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.left {
		return true
	}
	f()
	return false
}
