package redisq

import (
	"sync"

	"github.com/redis/go-redis/v9"
)

// notifier wakes every goroutine waiting on its channel at once: notify
// closes the channel and installs a new one.
type notifier struct {
	mu sync.Mutex
	ch chan struct{} // closed at the next notify
}

func newNotifier() notifier { return notifier{ch: make(chan struct{})} }

// wait returns the channel the next notify closes. Take it before looking
// for work, so that a notify in between is not missed.
func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

func (n *notifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	close(n.ch)
	n.ch = make(chan struct{})
}

// listen turns the subscription's messages into local wake-ups: 'r' a
// message may be ready, 't' a deadline was set earlier than any known.
// Pub/sub is at most once: after every (re)subscription everything
// wakes and looks again.
func (q *Queue) listen(ch <-chan any) {
	defer q.wg.Done()
	for m := range ch {
		switch v := m.(type) {
		case *redis.Message:
			if v.Payload == "r" {
				q.ready.notify()
			} else {
				q.kickHousekeeper()
			}
		case *redis.Subscription:
			q.ready.notify()
			q.kickHousekeeper()
		}
	}
}

func (q *Queue) kickHousekeeper() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}
