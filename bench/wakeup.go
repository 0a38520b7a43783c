package main

import "sync"

// wakeup wakes goroutines waiting for "something was enqueued" in the
// adapters of libraries that have no cancellable blocking dequeue (dque,
// bbolt). A waiter takes the channel first, then tries to dequeue, then
// waits on the channel: an enqueue between the try and the wait closes the
// channel it holds, so no wake-up is lost.
type wakeup struct {
	mu      sync.Mutex
	ch      chan struct{} // closed by the next broadcast; guarded by mu
	waiting bool          // someone holds ch; guarded by mu
}

func newWakeup() *wakeup { return &wakeup{ch: make(chan struct{})} }

// wait returns the channel the next broadcast closes.
func (s *wakeup) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting = true
	return s.ch
}

// broadcast wakes every goroutine holding a channel from wait.
func (s *wakeup) broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.waiting {
		return
	}
	close(s.ch)
	s.ch = make(chan struct{})
	s.waiting = false
}
