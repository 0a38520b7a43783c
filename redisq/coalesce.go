package redisq

import "sync"

// coalescer gathers concurrent calls of one kind (Acks, Enqueues, lone
// Dequeues) and runs one server call of them at a time: a caller that
// finds none running runs its own at once; the others queue, and the
// caller whose call returns hands what queued (up to maxCoalesce items)
// to the oldest queued caller, which runs it as one call and hands on in
// turn. The Redis counterpart of a group commit: one server call and one
// fsync for many, and no caller serves others' batches before it returns
// its own result.
type coalescer[T any] struct {
	mu      sync.Mutex
	pending []*coalesced[T] // queued, not yet sent; empty unless busy
	busy    bool            // a caller is running a call
}

// maxCoalesce is the most items one call carries.
const maxCoalesce = 512

type coalesced[T any] struct {
	v     T
	err   error
	batch []*coalesced[T] // set before done is closed when this caller is to run them
	done  chan struct{}   // closed once err is set, or batch
}

// do queues v and returns its error once a call of run, given v among
// others, has returned; run returns one error per item.
func (c *coalescer[T]) do(v T, run func([]T) []error) error {
	req := &coalesced[T]{v: v, done: make(chan struct{})}
	c.mu.Lock()
	if !c.busy {
		c.busy = true
		c.mu.Unlock()
		req.batch = []*coalesced[T]{req}
	} else {
		c.pending = append(c.pending, req)
		c.mu.Unlock()
		<-req.done
		if req.batch == nil { // run by another caller
			return req.err
		}
	}
	req.runBatch(run)
	c.handOn()
	return req.err
}

// runBatch runs the batch handed to req and sets every caller's error,
// waking the others; req's own done was closed when the batch was handed
// to it, if at all.
func (req *coalesced[T]) runBatch(run func([]T) []error) {
	vs := make([]T, len(req.batch))
	for i, b := range req.batch {
		vs[i] = b.v
	}
	for i, err := range run(vs) {
		b := req.batch[i]
		b.err = err
		if b != req {
			close(b.done)
		}
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
