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
}

// maxCoalesce is the most items one call carries.
const maxCoalesce = 512

type coalesced[T any] struct {
	v        T
	err      error
	panicked any             // what the call of run that carried v panicked with, if it did
	batch    []*coalesced[T] // set before done is closed when this caller is to run them
	done     chan struct{}   // closed once err or panicked is set, or batch
}

// do queues v and returns its error once a call of run, given v among
// others, has returned; run returns one error per item. If that call
// panics, do panics with the same value.
func (c *coalescer[T]) do(v T, run func([]T) []error) error {
	return c.doCtx(nil, v, run)
}

// doCtx is do for a caller with a context: while v waits for the call
// ahead of it (which may take until OpTimeout, sending again what the
// server refused), ctx's end takes v back and returns ctx's error, as no
// call has carried v. Once a call carries v, its caller waits for it.
func (c *coalescer[T]) doCtx(ctx context.Context, v T, run func([]T) []error) error {
	req := &coalesced[T]{v: v, done: make(chan struct{})}
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
		var end <-chan struct{}
		if ctx != nil {
			end = ctx.Done()
		}
		select {
		case <-req.done:
		case <-end:
			if c.withdraw(req) {
				return ctx.Err()
			}
			<-req.done // taken by a call meanwhile: its outcome is req's
		}
		if req.batch == nil { // run by another caller
			if req.panicked != nil {
				panic(req.panicked)
			}
			return req.err
		}
	}
	c.gather(req)
	defer c.handOn()
	req.runBatch(run)
	return req.err
}

// withdraw takes req out of the queue and reports whether it was still
// there: no call has taken it (gather, handOn take it under mu).
func (c *coalescer[T]) withdraw(req *coalesced[T]) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.pending, req)
	if i < 0 {
		return false
	}
	c.pending = slices.Delete(c.pending, i, i+1)
	return true
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

// runBatch runs the batch handed to req; req's own done was closed when
// the batch was handed to it, if at all.
func (req *coalesced[T]) runBatch(run func([]T) []error) {
	vs := make([]T, len(req.batch))
	for i, b := range req.batch {
		vs[i] = b.v
	}
	var errs []error
	defer req.finish(&errs)
	errs = run(vs)
	if len(errs) != len(vs) {
		panic(fmt.Sprintf("redisq: a coalesced call of %d items returned %d errors", len(vs), len(errs)))
	}
}

// finish gives every caller of req's batch its error from errs, or what
// run panicked with, waking the others, and panics on in req's caller if
// run did. Deferred by runBatch, for its recover.
func (req *coalesced[T]) finish(errs *[]error) {
	p := recover()
	for i, b := range req.batch {
		if p != nil {
			b.panicked = p
		} else {
			b.err = (*errs)[i]
		}
		if b != req {
			close(b.done)
		}
	}
	if p != nil {
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
	c.mu.Unlock()
	batch[0].batch = batch
	close(batch[0].done)
}
