package redisq

import "github.com/walq/walq/queue"

// Waiting returns how many blocked Pulls of s wait to be woken.
func Waiting[K queue.SortKey](s *Sorted[K]) int {
	s.ready.mu.Lock()
	defer s.ready.mu.Unlock()
	return len(s.ready.waiting)
}
