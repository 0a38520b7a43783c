package redisq

import "github.com/walq/walq/queue"

// Waiting returns how many blocked Pulls of s wait to be woken.
func Waiting[K queue.SortKey](s *Sorted[K]) int {
	return waiting(s.handle)
}

// QueueWaiting returns how many blocked Dequeues of q wait to be woken.
func QueueWaiting(q *Queue) int {
	return waiting(q.handle)
}

// waiting returns how many waiters of h's notifier wait to be woken.
func waiting(h *handle) int {
	h.ready.mu.Lock()
	defer h.ready.mu.Unlock()
	return len(h.ready.waiting)
}
