package redisq

import "github.com/walq/walq/queue"

// Restless makes the housekeeper of a handle opened with o pass again as
// soon as each pass ends, whatever o.Clock says: a test that shares its
// clock with the handle then meets a pass at any moment, as it may on a
// loaded machine. It returns o.
func Restless(o *Options) *Options {
	o.restless = true
	return o
}

// Waiting returns how many blocked Pulls of s wait to be woken.
func Waiting[K queue.SortKey](s *Sorted[K]) int {
	s.ready.mu.Lock()
	defer s.ready.mu.Unlock()
	return len(s.ready.waiting)
}
