package redisq

import (
	"cmp"
	"errors"
	"time"
)

// idleRecheck bounds the housekeeper's sleep: pub/sub is at most once, so
// a deadline announced while the subscription was down is found by the
// next look at the latest.
const idleRecheck = 30 * time.Second

// housekeep is the handle's background goroutine: it ends expired leases
// (unless ManualRequeue) and promotes due delays, then sleeps until the
// earliest deadline on the server, a 't' announcement of an earlier one,
// or Close. A pass that fails once the handle is closed ends it unlogged.
func (h *handle) housekeep(sweep sweepFunc) {
	defer h.wg.Done()
	var st sweepState
	for {
		wait := idleRecheck
		h.armed.Store(unarmed)
		n, next, err := h.sweepPasses(sweep)
		if err != nil && h.isClosed() { // cut short by Close: no failure
			return
		}
		st = h.logSweep(n, err, st)
		switch {
		case err != nil && !errors.Is(err, ErrNotDurable): // not durable: done, next is known
			wait = time.Second
		case next >= 0:
			wait = min(next, idleRecheck)
		}
		h.armed.Store(h.o.Clock.Now().Add(wait).UnixMicro())
		if !h.rest(wait) {
			return
		}
	}
}

// sweepPasses runs sweep, and again at once, up to sendTries passes in all,
// while its connection drops: with a client that sends nothing again,
// each stale connection of the pool fails the pass that draws it, which
// is no outage to log, and a pass may run again whenever (the next finds
// done what the last did). It returns the leases the passes that replied
// ended.
func (h *handle) sweepPasses(sweep sweepFunc) (int, time.Duration, error) {
	ended, next, err := sweep(!h.o.ManualRequeue)
	for try := 1; try < sendTries && dropped(err) && !h.isClosed(); try++ {
		var n int
		n, next, err = sweep(!h.o.ManualRequeue)
		ended += n
	}
	return ended, next, err
}

// rest waits until the housekeeper's next pass is due: wait has passed
// on the handle's clock or a kick came. It returns false once the handle
// is closed.
func (h *handle) rest(wait time.Duration) bool {
	timer := h.o.Clock.After
	if h.o.restless {
		timer, wait = time.After, 0
	}
	select {
	case <-h.closed:
		return false
	case <-h.kick:
	case <-timer(wait):
	}
	return true
}

// sweepState is what the housekeeper's log has said of its passes, so
// that it says each change once.
type sweepState struct {
	failing bool // the last pass that ended failed (not ErrNotDurable)
	short   bool // a pass fell short of Replicas, and none has reached them since
}

// logSweep logs what a housekeeping pass did: the leases it ended, its
// failure (once, while it lasts) and the recovery after one, and apart
// from those a pass that did its work but fell short of Replicas
// (ErrNotDurable: once, while it lasts) and the pass that reached them
// again. It returns the state after the pass.
func (h *handle) logSweep(ended int, err error, st sweepState) sweepState {
	short := errors.Is(err, ErrNotDurable)
	next := sweepState{failing: err != nil && !short, short: short || (st.short && err != nil)}
	l := h.o.Logger
	if l == nil {
		return next
	}
	switch {
	case next.failing && !st.failing:
		l.Warn("redisq: housekeeping failed; retrying every second", "err", err)
	case !next.failing && st.failing:
		l.Info("redisq: housekeeping works again")
	}
	switch {
	case short && !st.short:
		l.Warn("redisq: housekeeping done, not acknowledged by enough replicas", "err", err)
	case err == nil && st.short:
		l.Info("redisq: housekeeping acknowledged by enough replicas again")
	}
	if ended > 0 {
		l.Info("redisq: leases ran out", "ended", ended)
	}
	return next
}

// sweep runs the housekeeping script until it has caught up. It returns
// the leases it ended and how long until the next deadline (-1: none).
// A call whose WAIT fell short (ErrNotDurable) did its work: the sweep
// goes on, and returns that error with what it found.
func (q *Queue) sweep(expire bool) (int, time.Duration, error) {
	const limit = 1000
	flag := "0"
	if expire {
		flag = "1"
	}
	total := 0
	var short error
	for {
		ctx, cancel := q.passContext()
		now := q.o.Clock.Now()
		v, err := q.run(ctx, fnHousekeep, now, flag, limit)
		cancel()
		if !replied(v, err) {
			return total, -1, scriptErr("housekeep", err)
		}
		short = cmp.Or(short, err)
		r, _ := v.([]any)
		if len(r) != 3 {
			return total, -1, short
		}
		n := int(toInt(r[0]))
		total += n
		if n == limit {
			continue
		}
		next := int64(-1)
		if d := toInt(r[2]); d >= 0 {
			next = d
		}
		if l := toInt(r[1]); expire && l >= 0 && (next < 0 || l < next) {
			next = l
		}
		if next < 0 {
			return total, -1, short
		}
		return total, max(0, time.UnixMicro(next).Sub(now)), short
	}
}

// RequeueExpired ends every lease whose deadline has passed: its message
// is ready again, or dead once it has had MaxDeliveries. It returns how
// many leases it ended. Every open handle does this by itself unless
// Options.ManualRequeue is set.
func (q *Queue) RequeueExpired() (int, error) {
	n, _, err := q.sweep(true)
	return n, err
}
