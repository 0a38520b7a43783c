package redisq

import "sync"

// coalescer gathers concurrent calls of one kind (Acks, Enqueues): the
// first caller runs everything queued while it runs, in calls of up to
// maxCoalesce items; the others wait for their result. The Redis
// counterpart of a group commit: one server call and one fsync for many.
type coalescer[T any] struct {
	mu      sync.Mutex
	pending []*coalesced[T] // queued, not yet sent
	busy    bool            // a caller is running a batch
}

const maxCoalesce = 512

type coalesced[T any] struct {
	v    T
	err  error
	done chan struct{} // closed when err is set
}

// do queues v and returns its error once a call of run, given v among
// others, has returned; run returns one error per item.
func (c *coalescer[T]) do(v T, run func([]T) []error) error {
	req := &coalesced[T]{v: v, done: make(chan struct{})}
	c.mu.Lock()
	c.pending = append(c.pending, req)
	if c.busy {
		c.mu.Unlock()
		<-req.done
		return req.err
	}
	c.busy = true
	for len(c.pending) > 0 {
		batch := c.pending[:min(len(c.pending), maxCoalesce)]
		c.pending = c.pending[len(batch):]
		c.mu.Unlock()
		vs := make([]T, len(batch))
		for i, b := range batch {
			vs[i] = b.v
		}
		for i, err := range run(vs) {
			batch[i].err = err
			close(batch[i].done)
		}
		c.mu.Lock()
	}
	c.busy = false
	c.mu.Unlock()
	return req.err
}
