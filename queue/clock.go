package queue

import (
	"sync/atomic"
	"time"
)

// Clock is the queue's source of time. Tests inject a fake one to control
// ack timeouts and delays without sleeping.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// clockRecheck is the longest the housekeeper, while it waits for a time
// by the queue's clock (a lease deadline, or the due time a blocked
// Dequeue or Pull waits for: a delay ends, a hold ends, a window closes),
// sleeps before it reads the clock again. Timers run on the monotonic
// clock (Clock.After), which a step of the wall clock does not move: after
// a forward step the time waited for may have come, and it is noticed at
// most clockRecheck late, not up to the whole delay, window or AckTimeout
// late. The housekeeper reads the clock for every blocked call at once
// (sleepers.go): a blocked call itself sleeps until its time or a wake,
// and calls that do not block pay nothing.
const clockRecheck = time.Second

// recheckAfter returns the timer of a sleep of d by clock: it fires after
// d, or after clockRecheck when that is sooner.
func recheckAfter(clock Clock, d time.Duration) <-chan time.Time {
	return clock.After(min(d, clockRecheck))
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// wallClock reads the system clock for the queue's operations (Queue.now)
// when Options.Clock is the default: the wall clock's reading is a base,
// read with time.Now, plus the monotonic time since the base. That is one
// read of the monotonic clock per operation instead of a read of both
// clocks (time.Now), about 35 ns less of the ~85 ns a time.Now costs on a
// virtual machine's clock. The base is read again once it is resync old,
// so a step of the wall clock (set by hand, stepped by NTP, a resume from
// suspend, which the monotonic clock does not count) shows in the
// readings within resync; between two bases the readings advance with the
// monotonic clock (on Linux NTP slews it as it slews the wall clock; on
// other systems the two may drift apart by up to what one resync allows).
//
// A base replaces only the base its reader found expired: a reader that
// stalled between its two clock reads, while another reader rebased,
// keeps its reading but does not set the others' readings back.
type wallClock struct {
	base   atomic.Pointer[wallBase] // the last base; replaced, never changed
	resync time.Duration            // the longest a base is used
}

// wallBase is a reading of the system clock: its wall and monotonic parts.
type wallBase struct {
	at   time.Time // time.Now's reading, with its monotonic part
	wall int64     // at in unix nanoseconds
}

// wallResync is how long a wallClock uses one base: a wall-clock step
// shows in the queue's readings at most this late.
const wallResync = time.Millisecond

func newWallClock(resync time.Duration) *wallClock {
	c := &wallClock{resync: resync}
	c.rebase(nil, time.Now())
	return c
}

// unixNano returns the wall clock's time in unix nanoseconds.
func (c *wallClock) unixNano() int64 {
	b := c.base.Load()
	d := time.Since(b.at) // the monotonic clock only
	if d >= c.resync {
		return c.rebase(b, time.Now())
	}
	return b.wall + int64(d)
}

// rebase makes now, a reading of the system clock, the base in place of
// expired, the base its caller found too old, and returns now's wall time.
// When another reader replaced expired first, its base stays: now may be
// older than readings already taken from it.
func (c *wallClock) rebase(expired *wallBase, now time.Time) int64 {
	nb := &wallBase{at: now, wall: now.UnixNano()}
	c.base.CompareAndSwap(expired, nb)
	return nb.wall
}
