package redisq

import (
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// notifier wakes blocked consumers one at a time: each 'r' means at
// least one message became ready, so it wakes one waiter; a waiter that
// was woken and leased something wakes the next (more may be ready), and
// so does one that failed or whose context ended; one that looked and
// found nothing ends the chain. Waking every waiter for every
// message would cost a script call per waiter.
type notifier struct {
	mu      sync.Mutex
	waiting []chan struct{} // registered waiters, oldest first; one-slot channels
}

// register adds a waiter. Register before looking for work, so that a
// wake-up in between is not missed.
func (n *notifier) register() chan struct{} {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	n.waiting = append(n.waiting, ch)
	n.mu.Unlock()
	return ch
}

// deregister removes a waiter and says whether it had been woken.
func (n *notifier) deregister(ch chan struct{}) bool {
	n.mu.Lock()
	for i, w := range n.waiting {
		if w == ch {
			n.waiting = append(n.waiting[:i], n.waiting[i+1:]...)
			break
		}
	}
	n.mu.Unlock()
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// notifyOne wakes the oldest waiter.
func (n *notifier) notifyOne() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.waiting) > 0 {
		n.waiting[0] <- struct{}{}
		n.waiting = n.waiting[1:]
	}
}

// notifyAll wakes every waiter.
func (n *notifier) notifyAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, w := range n.waiting {
		w <- struct{}{}
	}
	n.waiting = nil
}

// listen turns the subscription's messages into local wake-ups: 'r' a
// message may be ready, 't' a deadline was set earlier than any known.
// Pub/sub is at most once: after every (re)subscription everything
// wakes and looks again. It ends when the subscription's channel closes
// or the handle does (Close need not wait for the subscription's close,
// closeSubscription).
func (h *handle) listen(ch <-chan any) {
	defer h.wg.Done()
	for {
		var m any
		select {
		case v, ok := <-ch:
			if !ok {
				return
			}
			m = v
		case <-h.closed:
			return
		}
		switch v := m.(type) {
		case *redis.Message:
			if v.Payload == "r" {
				h.ready.notifyOne()
			} else {
				h.announced(v.Payload)
			}
		case *redis.Subscription:
			h.ready.notifyAll()
			h.kickHousekeeper()
		}
	}
}

// announced wakes the housekeeper for a 't<µs>' announcement of a
// deadline earlier than the one its timer is armed for.
func (h *handle) announced(payload string) {
	t, err := strconv.ParseInt(strings.TrimPrefix(payload, "t"), 10, 64)
	if err != nil || t < h.armed.Load() {
		h.kickHousekeeper()
	}
}

func (h *handle) kickHousekeeper() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}
