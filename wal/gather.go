package wal

import (
	"sync/atomic"
	"time"
)

// Under SyncAlways each fsync covers the groups written before it starts.
// The callers an fsync releases append their next records moments later.
// If the next fsync started at once with only the callers that arrived
// while the last one ran, the callers would split into two cohorts taking
// turns, each call waiting for two fsyncs. So the committer gathers:
//
//   - The sleepers are the callers blocked in Commit.Wait for an fsync.
//     When an fsync ends, before it wakes anyone, the sleepers are every
//     caller it releases plus every caller already waiting for the next
//     one: the siblings, the callers expected to wait together again.
//   - While fewer sleepers than siblings wait, the next fsync is held back
//     (held), at most until gatherFor after the last fsync ended. A caller
//     that arrives meanwhile and does not complete the count leaves its
//     group to the gathering; the one that completes it writes every
//     gathered group and runs the fsync itself. Once time runs out, the
//     first caller to arrive does the same, without a hand-off; if none
//     arrives, the committer goroutine's timer writes and fsyncs what
//     gathered.
//   - gatherFor follows the callers and the disk (gatherWindow): twice the
//     time the siblings took to come back in the last round, at least half
//     and at most the whole of the last fsync's time. A gathering that
//     waits in vain costs at most one fsync's time, once: the next round
//     counts only the callers that came back. One that brings a caller in
//     saves that caller a whole fsync and the gap that follows it. (With
//     half an fsync as the only bound, callers that need a little longer
//     than that to come back, as on a busy machine with few cores, lost
//     every round to the timer and split into cohorts.)
//
// Nobody waits for a gathering alone. A lone caller is the only sleeper
// when its fsync ends, so the siblings are one and it completes the count
// itself; a caller that comes after a pause finds the deadline passed.
// Callers that do not block in Wait (Done, WaitWritten) are not counted
// and never held. Durability does not depend on any of this: a commit is
// completed only by an fsync that started after its group was written.

// gatherFraction is the inverse of the part of the last fsync's time that
// the next one is held back for siblings at least.
const gatherFraction = 2

// gatherWindow returns how long after an fsync that took took the next
// one may be held, given how long after the previous fsync's end its
// siblings were all back (back; the window itself when it ran out, 0
// when nobody was held).
func gatherWindow(took, back time.Duration) time.Duration {
	return min(max(took/gatherFraction, 2*back), took, maxGather)
}

// maxGather bounds the hold whatever an fsync took.
const maxGather = time.Millisecond

// gathering is the committer's count of the callers it gathers for. The
// atomics are read without committer.mu by writeFor; the rest is guarded
// by committer.mu.
type gathering struct {
	sleepers atomic.Int32 // callers blocked in Commit.Wait for an fsync
	siblings atomic.Int32 // sleepers when the last fsync ended
	holding  atomic.Bool  // the next fsync is held back for siblings
	until    atomic.Int64 // while holding: when the hold ends, in ns since epoch

	epoch     time.Time     // the origin of until; set at Open, immutable
	gatherFor time.Duration // how long after the last fsync ended the next one may be held
	back      time.Duration // how long after the last fsync ended the held siblings were back; gatherFor if never; 0 if none held
	fixed     time.Duration // tests: gatherFor, whatever the last fsync took; 0 in production
	holds     int           // holds begun since Open; for tests
}

// ended takes the figures of an fsync that succeeded.
func (g *gathering) ended(job *syncJob) {
	g.siblings.Store(job.sleepers)
	g.gatherFor = gatherWindow(job.took, g.back)
	g.back = 0
	if g.fixed > 0 {
		g.gatherFor = g.fixed
	}
}

// held reports whether a caller that does not complete the siblings
// leaves its group to the gathering (see writeFor): not once the hold's
// time is up, so that the caller, rather than the timer's two hand-offs
// (committer goroutine, then syncer), starts the fsync. A stale answer
// only costs a write or an fsync: the timer ends every hold.
func (g *gathering) held() bool {
	return g.holding.Load() && g.sleepers.Load() < g.siblings.Load() &&
		int64(time.Since(g.epoch)) < g.until.Load()
}

// hold reports whether the next fsync should wait for siblings, given
// when the last one ended, and arms the committer's timer for when it
// stops waiting. The caller holds committer.mu.
func (c *committer) hold() bool {
	g := &c.gathering
	n := g.sleepers.Load()
	if n <= 0 || n >= g.siblings.Load() { // nobody blocks in Wait, or all are back
		if g.holding.Load() && n > 0 {
			g.back = time.Since(c.lastSync)
		}
		g.holding.Store(false)
		return false
	}
	until := c.lastSync.Add(g.gatherFor)
	now := time.Now()
	if !now.Before(until) {
		if g.holding.Load() {
			g.back = g.gatherFor
		}
		g.holding.Store(false)
		return false
	}
	if !g.holding.Load() {
		g.holds++
		g.until.Store(int64(until.Sub(g.epoch)))
		g.holding.Store(true)
	}
	if !c.timerOn {
		c.timer.Reset(until.Sub(now))
		c.timerOn = true
	}
	return true
}

// sleep counts the caller among the sleepers until the group is done.
func (c *Commit) sleep() {
	if !c.durable || c.l == nil || c.l.c == nil {
		return
	}
	for {
		n := c.sleeps.Load()
		if n < 0 {
			return // done already
		}
		if c.sleeps.CompareAndSwap(n, n+1) {
			c.l.c.gathering.sleepers.Add(1)
			return
		}
	}
}

// wake stops counting the group's callers among the sleepers; finish
// calls it before the group is done.
func (c *Commit) wake() {
	if n := c.sleeps.Swap(-1); n > 0 {
		c.l.c.gathering.sleepers.Add(-n)
	}
}

// endHold starts the fsync a gathering holds back once every caller it
// waits for is back, for a caller whose group someone else already wrote
// (an urgent caller's write, a Done wake): with nothing to write, that
// caller would otherwise leave the fsync to the hold's deadline. A stale
// read only costs a look under mu.
func (c *committer) endHold() {
	if !c.gathering.holding.Load() || c.gathering.held() {
		return
	}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.commit()
	job := c.nextSync(false)
	c.mu.Unlock()
	if job != nil {
		c.runSync(job)
		c.syncedOwn(job)
	}
}
