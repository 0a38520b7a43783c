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
// least one message became ready, and each (re)subscription that
// announcements may have been missed, so either wakes one waiter; a
// waiter that was woken and leased something wakes the next (more may be
// ready), and so does one that failed or whose context ended, or that
// leaves (pass) holding a wake-up; one that looked and found nothing
// ends the chain. A wake-up is a buffered send to the waiter's channel,
// taken only after the waiter's look (the select of dequeue and pull) or
// handed on when it leaves: so the look it causes starts after it was
// sent, and a woken waiter never ends the chain on a look older than the
// wake-up. Waking every waiter for every message, or for every
// resubscription, would cost a script call per waiter, all at once.
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

// subscriptionCheck is how long the receive loop (listen) waits for a
// message before it pings the subscription's server (a PING that cannot
// be written makes go-redis dial the subscription again), and how long
// it then waits for the Pong, or any message, before it drops the
// connection as silent: a server whose host vanished without a reset
// (power lost, a cable, a NAT or firewall that dropped the flow, a
// failover by DNS or VIP) leaves the PING in the kernel's send buffer
// and the receive without an error until the kernel gives up
// retransmitting, minutes later.
const subscriptionCheck = 3 * time.Second

// listen receives the subscription's messages under ctx, which Close
// ends (unsubscribe), and turns them into local wake-ups: 'r' a message
// may be ready, 't' a deadline was set earlier than any known. Pub/sub
// is at most once: after every (re)subscription one waiter looks again,
// and the chain (notifier) wakes the others while there is work, and the
// housekeeper runs a pass. A receive that fails (a dropped connection) is tried
// again after a pause; go-redis dials the subscription again, under
// ctx, within the next receive. A PING written after subscriptionCheck
// of quiet must be answered within subscriptionCheck: the receive that
// waits for it drops a connection that stays silent (receive), and the
// next receive dials again and subscribes, which wakes a waiter. It
// returns when ctx ends or the subscription or its client is closed.
func (h *handle) listen(ctx context.Context) {
	defer close(h.listened)
	pinged := false // a PING was written and nothing received since
	for pause := time.Duration(0); ; {
		m, err := h.receive(ctx, pinged)
		switch {
		case ctx.Err() != nil || errors.Is(err, redis.ErrClosed):
			return
		case err == nil:
			pause, pinged = 0, false
			h.received(m)
		case quiet(err) && pinged:
			pinged = false
			h.silent()
		case quiet(err):
			// Quiet for subscriptionCheck: a PING that fails to be
			// written dials again (its error is the next receive's to
			// see); one written must be answered.
			pinged = h.ps.Ping(ctx) == nil
		default:
			pinged = false
			pause = min(max(2*pause, rideFirst), rideMost)
			if !sleep(ctx, pause) {
				return
			}
		}
	}
}

// receive waits for the subscription's next message, subscriptionCheck
// at most. After a PING (pinged) it waits under a deadline of its
// context rather than ReceiveTimeout's timeout: go-redis keeps a
// connection whose ReceiveTimeout timed out (a quiet channel is no
// fault) but closes one whose read outlived its context's deadline, so
// that the next receive dials again and subscribes. This is where the
// handle relies on that rule of go-redis's PubSub (pubsub.go,
// releaseConn: isBadConn with allowTimeout only for a timeout of its
// own); TestSilentSubscriptionRedialed checks it.
func (h *handle) receive(ctx context.Context, pinged bool) (any, error) {
	if !pinged {
		return h.ps.ReceiveTimeout(ctx, subscriptionCheck)
	}
	rctx, cancel := context.WithTimeout(ctx, subscriptionCheck)
	defer cancel()
	return h.ps.Receive(rctx)
}

// silent logs that the subscription's PING went unanswered for
// subscriptionCheck: receive has dropped its connection, and the next
// receive dials again.
func (h *handle) silent() {
	if h.o.Logger != nil {
		h.o.Logger.Warn("redisq: wake-up subscription silent: PING unanswered; connecting again",
			"channel", h.wake, "waited", subscriptionCheck)
	}
}

// sleep waits for d, and reports false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
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
		// Announcements may have been missed while unsubscribed: one
		// waiter looks, and wakes the next only if it leased (notifier),
		// so a server back from a fault is not met by a script call from
		// every blocked consumer at once.
		h.ready.notifyOne()
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
