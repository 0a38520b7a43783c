package main

import (
	"context"
	"sync"
)

// fakeQueue is an in-memory queue whose mangle function decides what is
// stored for each enqueue: the harness's verification is tested by feeding
// it queues that lose, duplicate, damage or reorder messages.
type fakeQueue struct {
	mu     sync.Mutex
	items  [][]byte // ready messages, oldest first; guarded by mu
	n      int      // enqueues so far; guarded by mu
	mangle func(n int, p []byte, items [][]byte) [][]byte
	retain bool // keep the caller's slice instead of a copy, as a buggy queue would
	ready  *wakeup
}

func newFake(mangle func(n int, p []byte, items [][]byte) [][]byte) *fakeQueue {
	return &fakeQueue{mangle: mangle, ready: newWakeup()}
}

// fakeSystem wraps a fake in a System that opens it.
func fakeSystem(name string, q *fakeQueue) System {
	return System{Name: name, Family: "fake", Mode: name, Kind: KindQueue, Durable: true, FIFO: true,
		Config: func(Hint) string { return "in memory" },
		Open:   func(string, Hint) (Queue, error) { return q, nil }}
}

func (f *fakeQueue) Enqueue(_ context.Context, p []byte) error {
	if !f.retain {
		p = append([]byte(nil), p...)
	}
	f.mu.Lock()
	f.items = f.mangle(f.n, p, f.items)
	f.n++
	f.mu.Unlock()
	f.ready.broadcast()
	return nil
}

func (f *fakeQueue) NewConsumer() (Consumer, error) { return fakeConsumer{f}, nil }
func (f *fakeQueue) Close() error                   { return nil }

type fakeConsumer struct{ f *fakeQueue }

func (c fakeConsumer) Dequeue(ctx context.Context) (Delivery, error) {
	for {
		woken := c.f.ready.wait()
		c.f.mu.Lock()
		if len(c.f.items) > 0 {
			p := c.f.items[0]
			c.f.items = c.f.items[1:]
			c.f.mu.Unlock()
			return plainDelivery(p), nil
		}
		c.f.mu.Unlock()
		select {
		case <-woken:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c fakeConsumer) Close() error { return nil }

// Mangle functions: each keeps the queue honest except for one kind of
// fault every tenth message.
func honest(_ int, p []byte, items [][]byte) [][]byte { return append(items, p) }

func lossy(n int, p []byte, items [][]byte) [][]byte {
	if n%10 == 9 {
		return items
	}
	return append(items, p)
}

func duplicating(n int, p []byte, items [][]byte) [][]byte {
	if n%10 == 9 {
		items = append(items, p)
	}
	return append(items, p)
}

func corrupting(n int, p []byte, items [][]byte) [][]byte {
	if n%10 == 9 {
		p[len(p)-1] ^= 0xff
	}
	return append(items, p)
}

func reordering(n int, p []byte, items [][]byte) [][]byte {
	if n%10 == 9 && len(items) > 0 {
		last := items[len(items)-1]
		return append(items[:len(items)-1], p, last)
	}
	return append(items, p)
}
