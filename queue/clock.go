package queue

import (
	"sync"
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
//
// The base is kept as two numbers rather than a struct behind a pointer,
// so that a rebase allocates nothing: operations more than resync apart
// (each SyncAlways call, which waits for an fsync, or a queue at a low
// rate) rebase at every reading.
type wallClock struct {
	start  time.Time     // the origin of the monotonic offsets below; immutable
	resync time.Duration // the longest a base is used

	// The base. at is its monotonic offset from start in nanoseconds; off
	// is its wall time in unix nanoseconds minus at, so that a reading is
	// off plus the monotonic offset now. set stores off before at, and a
	// reader loads at before off: the off it gets belongs to the base it
	// judged young enough or to a later one.
	mu  sync.Mutex // serializes set's two stores with rebase's check
	at  atomic.Int64
	off atomic.Int64
}

// wallResync is how long a wallClock uses one base: a wall-clock step
// shows in the queue's readings at most this late.
const wallResync = time.Millisecond

func newWallClock(resync time.Duration) *wallClock {
	c := &wallClock{start: time.Now(), resync: resync}
	c.set(c.start, c.start.UnixNano())
	return c
}

// unixNano returns the wall clock's time in unix nanoseconds.
func (c *wallClock) unixNano() int64 {
	at := c.at.Load()
	m := int64(time.Since(c.start)) // the monotonic clock only
	if m-at >= int64(c.resync) {
		return c.rebase(at, time.Now())
	}
	return c.off.Load() + m
}

// rebase makes now, a reading of the system clock, the base in place of
// the base at expired, the one its caller found too old, and returns
// now's wall time. When another reader replaced expired first, its base
// stays: now may be older than readings already taken from it.
func (c *wallClock) rebase(expired int64, now time.Time) int64 {
	wall := now.UnixNano()
	c.mu.Lock()
	if c.at.Load() == expired {
		c.setLocked(now, wall)
	}
	c.mu.Unlock()
	return wall
}

// set makes the base the reading at, a time.Now with its monotonic part,
// whose wall time is wall in unix nanoseconds.
func (c *wallClock) set(at time.Time, wall int64) {
	c.mu.Lock()
	c.setLocked(at, wall)
	c.mu.Unlock()
}

func (c *wallClock) setLocked(at time.Time, wall int64) {
	m := int64(at.Sub(c.start))
	c.off.Store(wall - m)
	c.at.Store(m)
}
