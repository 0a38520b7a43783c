package wal

import (
	"sync"
	"sync/atomic"
)

// Callers that wait for their group write the gathered groups themselves
// (Commit.Wait, WaitWritten). One of them at a time leads: it takes every
// group gathered so far and writes them with one WriteBatch (one per
// segment they reach, at a roll: committer.writeParts). A caller that
// finds a leader at work does not queue on the committer's mutex: it waits
// until either its own group is written (the leader took it) or the
// leader is done, and then, if its group is still not written, it leads
// the next write, which takes everything that gathered meanwhile. It
// yields its processor twice before it blocks (committer.follow): the
// leader is usually done by then, and no wake-up is needed. A lone
// caller leads at once and waits for nobody.
//
// Without fsync a write is short, and callers that take turns at their
// own lock (the queue's) rarely find one in progress: each would write its
// own record. So, when the sync mode needs no fsync, a leader that saw
// followers the last time it let others run first lets the goroutines
// ready to run on its processor go first (runtime.Gosched, no sleep): a
// caller its unlock just woke appends and becomes a follower, and one
// write covers both. Once maxMisses yields in a row bring no follower,
// leaders stop yielding and only try again after yieldProbe writes, then
// after twice as many each time a try brings nobody, up to maxProbe: a
// yield wakes an idle processor to look for work, which costs a lone
// caller several microseconds of CPU, so a lone caller almost never
// yields. A follower, whether a yield brought it or it came by itself,
// brings the interval back to yieldProbe.

// maxMisses is how many yields in a row may bring no follower before the
// leader stops yielding.
const maxMisses = 4

// yieldProbe and maxProbe bound how many writes a leader makes without
// yielding, once yielding stopped bringing followers, before it tries
// again.
const (
	yieldProbe = 64
	maxProbe   = 4096
)

// lead says whether a caller is writing on behalf of the others. A lone
// caller takes and releases the lead with one CAS each; the mutex is
// taken only by followers, and by a leader that has some.
type lead struct {
	state atomic.Int64 // leadBusy while a caller leads, plus 2 per follower; 0 when nobody leads

	mu   sync.Mutex    // guards turn, and the followers' changes of state
	turn chan struct{} // closed when the leader is done; nil while no follower waits

	// Read and written only by the leader (they pass from one leader to
	// the next with state's CASes).
	misses    int // yields in a row that brought no follower
	unyielded int // writes since the last yield
	probe     int // once misses is maxMisses: writes between two yields, yieldProbe…maxProbe; 0 means yieldProbe
}

// leadBusy is lead.state's bit that says a caller leads: it holds, or is
// about to take, committer.mu to write. The followers are counted above it.
const leadBusy = 1

// take makes the caller the leader and returns nil, or, if another caller
// leads, returns a channel closed when that leader is done. A new leader
// learns whether it should yield before it writes (see above; only
// asked when gather is set).
func (d *lead) take(gather bool) (turn <-chan struct{}, yield bool) {
	if d.state.CompareAndSwap(0, leadBusy) {
		return nil, d.yield(gather)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		s := d.state.Load()
		if s == 0 {
			if d.state.CompareAndSwap(0, leadBusy) {
				return nil, d.yield(gather)
			}
			continue
		}
		if d.state.CompareAndSwap(s, s+2) { // a leader cannot leave without mu now
			if d.turn == nil {
				d.turn = make(chan struct{})
			}
			return d.turn, false
		}
	}
}

// yield says whether the new leader yields before its write.
func (d *lead) yield(gather bool) bool {
	if !gather {
		return false
	}
	d.unyielded++
	if d.misses < maxMisses || d.unyielded >= max(d.probe, yieldProbe) {
		d.unyielded = 0
		return true
	}
	return false
}

// release ends the caller's lead and wakes the followers. yielded says
// whether the leader yielded before its write.
func (d *lead) release(yielded bool) {
	misses, probe := d.misses, d.probe
	d.count(yielded, false)
	if d.state.CompareAndSwap(leadBusy, 0) {
		return
	}
	d.misses, d.probe = misses, probe // followers came: count again
	d.mu.Lock()
	d.count(yielded, true)
	turn := d.turn
	d.turn = nil
	d.state.Store(0)
	d.mu.Unlock()
	if turn != nil {
		close(turn)
	}
}

// count updates the yield policy after a write (see above).
func (d *lead) count(yielded, followers bool) {
	switch {
	case followers:
		d.probe = yieldProbe
		if yielded {
			d.misses = 0
		}
	case !yielded:
	case d.misses < maxMisses:
		d.misses++
	default: // a probe in vain
		d.probe = min(2*max(d.probe, yieldProbe), maxProbe)
	}
}
