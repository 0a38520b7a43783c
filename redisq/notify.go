package redisq

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

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

// subscriptionCheck is how long the receive loop (listen) waits for a
// message before it pings the subscription's server: a PING that cannot
// be written makes go-redis dial the subscription again.
const subscriptionCheck = 3 * time.Second

// listen receives the subscription's messages under ctx, which Close
// ends (unsubscribe), and turns them into local wake-ups: 'r' a message
// may be ready, 't' a deadline was set earlier than any known. Pub/sub
// is at most once: after every (re)subscription everything wakes and
// looks again. A receive that fails (a dropped connection) is tried
// again after a pause; go-redis dials the subscription again, under
// ctx, within the next receive. It returns when ctx ends or the
// subscription or its client is closed.
func (h *handle) listen(ctx context.Context) {
	defer close(h.listened)
	for pause := time.Duration(0); ; {
		m, err := h.ps.ReceiveTimeout(ctx, subscriptionCheck)
		switch {
		case ctx.Err() != nil || errors.Is(err, redis.ErrClosed):
			return
		case err == nil:
			pause = 0
			h.received(m)
		case quiet(err):
			// Quiet for subscriptionCheck: a PING that fails to be
			// written dials again; its Pong comes through the next
			// receive. Its error is the next receive's to see.
			_ = h.ps.Ping(ctx)
		default:
			pause = min(max(2*pause, rideFirst), rideMost)
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
	}
}

// quiet reports whether err is a receive that waited subscriptionCheck
// for a message in vain: a read's timeout. A dial's timeout is not one
// (unsent): it is a failure, paused after as any other, so that a
// Dialer whose timeouts are short does not dial in a loop.
func quiet(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() && !unsent(err)
}

// received acts on one message of the subscription.
func (h *handle) received(m any) {
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
