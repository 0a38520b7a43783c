// Package fakeclock is a queue.Clock for tests: it moves only when the test
// advances it, and fires the timers that come due. It is safe for
// concurrent use.
package fakeclock

import (
	"sync"
	"time"
)

// Clock is a manual clock.
type Clock struct {
	mu      sync.Mutex
	now     time.Time     // the current time
	step    time.Duration // how far each reading of Now moves the clock first; 0: none
	waiters []waiter      // timers not yet fired
}

type waiter struct {
	at time.Time      // when it fires
	ch chan time.Time // buffered, one slot
}

// New returns a clock at 2026-01-01 00:00 UTC.
func New() *Clock {
	return &Clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// Now returns the clock's time; with a step set (StepEachReading), it
// moves the clock by the step first, so that no two readings agree.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.step > 0 {
		c.advanceLocked(c.step)
	}
	return c.now
}

// StepEachReading makes every later reading of Now move the clock by d
// first, firing the timers that come due; 0 stops it.
func (c *Clock) StepEachReading(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.step = d
}

// After returns a channel that receives once the clock has advanced by d.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{at: c.now.Add(d), ch: ch})
	return ch
}

// Advance moves the clock and fires the timers that are due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked(d)
}

// advanceLocked is Advance for a caller that holds c.mu.
func (c *Clock) advanceLocked(d time.Duration) {
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}
