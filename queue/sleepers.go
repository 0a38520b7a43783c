package queue

import "time"

// A blocked call (Dequeue, Pull) that waits until a time by the queue's
// clock (a delay ends, a hold ends, a window closes) sleeps on a timer of
// its own, which runs on the monotonic clock: a forward step of the wall
// clock does not move it. The queue re-checks the clock for all of them
// at once: each notes its due time (noteSleepLocked), and the housekeeper,
// which then reads the clock at least every clockRecheck, wakes them all
// once the earliest of those times has passed (wakeSleepers). A sleeper
// costs nothing while it waits, however many there are.

// noteSleepLocked notes that a blocked call sleeps d from now (d < 0: no
// due time), so that the housekeeper wakes it once that time has passed
// by the clock. It wakes the housekeeper when the time is the earliest
// noted. It returns whether it noted a time: the call then counts among
// the timed sleepers until it calls sleptTimed, once its sleep ended.
func (q *Queue) noteSleepLocked(now int64, d time.Duration) bool {
	if d < 0 {
		return false
	}
	q.timed.Add(1)
	if at := later(now, d); q.mu.sleepUntil == 0 || at < q.mu.sleepUntil {
		q.mu.sleepUntil = at
		q.wakeHousekeeper()
	}
	return true
}

// sleptTimed ends the count of a blocked call whose sleep noteSleepLocked
// timed (timed), once it left its sleep.
func (q *Queue) sleptTimed(timed bool) {
	if timed {
		q.timed.Add(-1)
	}
}

// wakeSleepers wakes every blocked call once the earliest due time they
// noted has passed by the clock, and returns how long until that time,
// or -1 when none is noted or no call that noted one is blocked any more.
func (q *Queue) wakeSleepers() time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.sleepUntil == 0 {
		return -1
	}
	if q.timed.Load() == 0 {
		// Every blocked call that noted a time has left (its context
		// ended, or a message came), whatever calls blocked with none
		// still wait for a signal: none waits for the time noted. A call
		// that blocks later notes its own, under q.mu, which this holds.
		// While one that noted a time stays, the earliest time noted is
		// kept, which may be a call's that left: it wakes the sleepers at
		// most early (they look again and sleep on), never late.
		q.mu.sleepUntil = 0
		return -1
	}
	now := q.now()
	if now < q.mu.sleepUntil {
		return time.Duration(q.mu.sleepUntil - now)
	}
	q.mu.sleepUntil = 0
	if !q.mu.closed {
		q.broadcastLocked()
	}
	return -1
}

// sleepTimer returns the timer of a blocked call's sleep of d (d < 0:
// none). It runs the whole of d: the housekeeper re-checks the clock for
// it. A read-only queue has no housekeeper: its timer ends after
// clockRecheck at the latest, for its caller to read the clock again.
func (q *Queue) sleepTimer(d time.Duration) <-chan time.Time {
	switch {
	case d < 0:
		return nil
	case q.opts.ReadOnly:
		return recheckAfter(q.opts.Clock, d)
	}
	return q.opts.Clock.After(d)
}
