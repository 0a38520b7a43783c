package queuetest

import "github.com/walq/walq/internal/fakeclock"

// Clock is the manual clock the suite hands to every queue it opens: a
// queue.Clock that moves only when a subtest advances it, firing the
// timers that come due. An engine must read every time from it: lease
// deadlines, delays, enqueue and delivery times, the dedup window.
type Clock struct {
	*fakeclock.Clock
}

// NewClock returns a manual clock at 2026-01-01 00:00 UTC.
func NewClock() *Clock { return &Clock{fakeclock.New()} }
