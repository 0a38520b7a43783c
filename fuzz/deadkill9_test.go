package fuzz_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walq/walq/fuzz"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestKill9Dead runs a child process that drives the dead-letter set of an
// ack queue and of a windowed queue as hard as it can (MaxDeliveries 2,
// nacks, dead-letters, RequeueDead, PurgeDead, RequeueAllDead,
// PurgeAllDead) beside compactions, SIGKILLs it at a random moment, and
// checks a copy of both directories:
//
//   - the oracle: nothing enqueued is lost, dead letters included; a purge
//     that returned is an ack; nothing is twice in the drain;
//   - every payload, delivered or dead, is the exact payload its token
//     was published with;
//   - a message's delivery count never goes down, except through a
//     requeue from the dead set, each delivery counts one more, and no
//     delivery counts more than MaxDeliveries;
//   - a dead-lettering that returned keeps the message dead, and a
//     requeue from the dead set that returned keeps it out of the dead
//     set, until its next delivery (one the kill kept the child from
//     reporting included: see cutOffCheck);
//   - a consumer never holds a message another consumer holds (leases
//     run for a minute: none runs out in a child's life, and a settle
//     refused with ErrLeaseLost is a violation).
//
// TestKill9DeadExpiry runs the same child with short leases instead.
//
// Short run: 12 cycles (40 without -short or -race). Long run:
//
//	WALQ_DEAD_CYCLES=1000 go test ./fuzz -run '^TestKill9Dead$' -timeout 2h -v
func TestKill9Dead(t *testing.T) { runKill9Dead(t, "TestKill9Dead", false) }

// TestKill9DeadExpiry is TestKill9Dead with leases of 25 to 100 ms, drawn
// per cycle, that the consumers let run out on purpose: some hold a
// delivery until past its deadline (then try Extend and a settle), some
// settle it about when it runs out. A message whose lease runs out is
// ready again with its delivery counted, or dead once it has had
// MaxDeliveries (2), so that the second lease that runs out dead-letters
// it. On top of TestKill9Dead's checks:
//
//   - a settle or Extend started more than lateMargin (5 ms) after the
//     deadline must fail with ErrLeaseLost; one that returned more than
//     lateMargin before the deadline must not (the child judges both by
//     the delivery's time plus the lease, the queue's own deadline, and
//     the queue reads its clock between the call's start and its return:
//     see judge);
//   - a delivery of a message whose lease did not run out yet by that
//     delivery's time is a violation (the child's check of overlapping
//     holds);
//   - a message whose lease ran out at MaxDeliveries (a settle after
//     the deadline was refused) is dead, after the kill too: the open of
//     a copy with the children's options lists it as dead, unless it was
//     requeued from the dead set or purged since; and it is never
//     delivered a third time.
//
// A delivery reported after a later one of the same message, or whose
// lease ran out before a purge of the message from the dead set started
// (a consumer stalled between its Dequeue and its report, past the lease),
// is checked against the limit only, and counted in the summary as late.
//
// Short run: 12 cycles (40 without -short or -race); with -short 4 to 7 s on a
// busy 2-core machine, 6 to 19 s under -race. Long run:
//
//	WALQ_DEAD_CYCLES=400 go test ./fuzz -run '^TestKill9DeadExpiry$' -timeout 1h -v
func TestKill9DeadExpiry(t *testing.T) { runKill9Dead(t, "TestKill9DeadExpiry", true) }

// runKill9Dead runs the cycles of TestKill9Dead (name), with short leases
// when expiry is set, or the child when this process is one.
func runKill9Dead(t *testing.T, name string, expiry bool) {
	if cfg := childConfigFromEnv(t, "kill9dead"); cfg != nil {
		runDeadChild(cfg)
		return
	}
	// Under -race every cycle runs three times as long (see cycle), and
	// fuzz/ci.sh runs the 40 cycles without it; the race run is for data
	// races in the parent and the children, which 12 cycles exercise.
	def := 40
	if testing.Short() || raceEnabled {
		def = 12
	}
	cycles := envInt(t, "WALQ_DEAD_CYCLES", def)
	rng, _ := testRand(t)
	h := &deadParent{t: t, name: name, expiry: expiry, rng: rng, dirA: t.TempDir(), dirW: t.TempDir(),
		oa: fuzz.NewOracle(), ow: fuzz.NewOracle(),
		lastDelivery: make(map[string]int), lastAt: make(map[string]int64), requeueAt: make(map[string]int64), purgeAt: make(map[string]int64), fate: make(map[string]byte)}
	start := time.Now()
	for cycle := 1; cycle <= cycles; cycle++ {
		h.cycle(cycle)
	}
	ra, rw := h.oa.Result(), h.ow.Result()
	t.Logf("ack queue: %s", ra)
	t.Logf("windowed queue: %s", rw)
	t.Logf("SUMMARY kill9dead: cycles=%d enqueued=%d acked=%d dead-seen=%d dead-checked-in-drains=%d requeued-from-dead=%d delivered-unreported-after-requeue=%d purged=%d lost=%d violations=0 in %v",
		cycles, ra.Enqueued+rw.Enqueued, ra.Acked+rw.Acked, h.deadSeen, h.deadDrained, h.requeued, h.cutOff, h.purged,
		ra.Lost+rw.Lost, time.Since(start).Round(time.Second))
	if expiry {
		t.Logf("SUMMARY kill9dead expiry: leases=%v..%v settles-refused-lease-lost=%d (at MaxDeliveries: %d) deliveries-at-MaxDeliveries=%d expired-dead-checks-after-kill=%d (of which dead-lettered by the open: %d) late-reports=%d",
			minDeadLease, maxDeadLease, h.lostSettles, h.expiredDead, h.atLimit, h.expiryChecked, h.expiryByOpen, h.late)
	}
}

// minDeadLease and maxDeadLease bound the leases of TestKill9DeadExpiry.
const (
	minDeadLease = 25 * time.Millisecond
	maxDeadLease = 100 * time.Millisecond
)

// deadMaxDeliveries is the children's MaxDeliveries.
const deadMaxDeliveries = 2

// Report codes of this test's child, beside child_test.go's ("d" and "l"
// carry the delivery count and the delivery's time, unix ns by the
// queue's clock: "d <token> <n> <at>"):
//
//	D  "D <token> <n>": listed in the dead set with n deliveries, payload checked
//	z  a call that dead-letters started (DeadLetter, or a nack at MaxDeliveries)
//	X  it returned: dead until its next delivery or requeue
//	q  "q <token> <at>": requeue from the dead set started at at (unix ns)
//	Q  it returned success
//	u  "u <token> <at>": a purge from the dead set started at at (unix ns)
//	U  it returned success (an ack, to the oracle)
//	L  "L <token> <n> <at>": a settle of the delivery made at at, the
//	   n-th, was refused with ErrLeaseLost (started late enough for it:
//	   see judge): the lease ran out, and at MaxDeliveries the message
//	   is dead until its next delivery or requeue

// deadParent is the parent side of TestKill9Dead.
type deadParent struct {
	t            *testing.T
	name         string        // the test, which the children run
	expiry       bool          // short leases (TestKill9DeadExpiry)
	lease        time.Duration // this cycle's AckTimeout
	sync         int           // this cycle's queue.SyncMode
	manual       bool          // this cycle's ManualRequeue
	rng          *rand.Rand
	dirA, dirW   string       // the ack queue's and the windowed queue's directories
	oa, ow       *fuzz.Oracle // their oracles
	lastDelivery map[string]int
	// lastAt is the time (unix ns) of a token's last delivery reported in
	// order, or of a later requeue of it from the dead set: a delivery
	// made before it is reported late.
	lastAt map[string]int64
	// requeueAt is the start (unix ns) of the last requeue of a token
	// from the dead set, which resets its count; 0 when none (lateCount).
	requeueAt map[string]int64
	// purgeAt is the start (unix ns) of the last purge of a token from
	// the dead set: a delivery whose lease ran out before it is reported
	// late (see delivered).
	purgeAt map[string]int64
	// fate is what a token's last returned call promises of its place:
	// 'X' dead, 'Q' not dead; 0 none (delivered since, or never).
	fate       map[string]byte
	violations []string
	deadSeen   int // dead-set listings of a token, in the children
	requeued   int // requeues from the dead set that returned
	purged     int // purges that returned
	// deadDrained counts the dead letters the drains found and checked.
	deadDrained int
	// cutOff counts the requeued tokens a drain found delivered since
	// with no report of it (see cutOffCheck).
	cutOff int
	// Short leases: settles refused because the lease ran out ("L"
	// lines); of those, at MaxDeliveries (fate 'E'); deliveries at
	// MaxDeliveries; 'E' tokens a recovery showed dead; deliveries
	// reported after a later one.
	lostSettles, expiredDead, atLimit, expiryChecked, late int
	// expiryByOpen counts the 'E' tokens that the kill left leased, which
	// the open after it dead-lettered.
	expiryByOpen int
}

func (h *deadParent) cycle(n int) {
	t := h.t
	cfg := childConfig{Mode: "kill9dead", Dir: h.dirA, Sorted: h.dirW, Cycle: n, Seed: h.rng.Uint64(),
		Sync: pickSync(h.rng), Lifetime: time.Minute}
	if h.rng.IntN(5) == 0 {
		cfg.DieAt = snapshotSteps[h.rng.IntN(len(snapshotSteps))]
	}
	longest := maxRun
	h.lease = time.Minute
	if h.expiry {
		h.lease = minDeadLease + time.Duration(h.rng.Int64N(int64(maxDeadLease-minDeadLease)))
		cfg.Lease = h.lease
		// Half the children end expired leases themselves, now and
		// then: a lease that ran out then often meets the kill before
		// its expiry is written, and the open after it must end it.
		cfg.Manual = h.rng.IntN(2) == 0
		longest += 4 * h.lease // time for a lease or two to run out
	}
	h.sync, h.manual = cfg.Sync, cfg.Manual
	run := time.Duration(h.rng.Int64N(int64(longest)))
	if raceEnabled {
		run *= 3
	}
	c := startChild(t, h.name, cfg)
	c.runFor(run, h.apply)
	what := fmt.Sprintf("cycle %d (sync %d, die at %q, lease %v, manual requeue %v, killed after %v)", n, cfg.Sync, cfg.DieAt, h.lease, cfg.Manual, run)
	if !c.killed() {
		t.Fatalf("%s: the child was not killed but exited (%v); its output:\n%s", what, c.err, c.output())
	}
	if len(h.violations) > 0 {
		t.Fatalf("%s: %s\nthe child's output:\n%s", what, strings.Join(h.violations, "; "), c.output())
	}
	if r := c.raceReport(); r != "" {
		t.Fatalf("%s: data race in the child:\n%s", what, r)
	}
	checkLive(t, what+", ack queue", h.oa, nil)
	checkLive(t, what+", windowed queue", h.ow, nil)
	h.check(what+", ack queue", h.oa, h.dirA, h.drainAck, h.deadAfterOpen)
	h.check(what+", windowed queue", h.ow, h.dirW, h.drainWindowed, h.deadValuesAfterOpen)
}

// apply feeds one report line to the oracles and to the checks of delivery
// counts and fates.
func (h *deadParent) apply(l string) {
	if len(l) < 2 {
		return
	}
	code, arg := l[0], l[2:]
	tok, count, _ := strings.Cut(arg, " ")
	count, at := cutInt(count, " ")
	o := h.oa
	if strings.HasPrefix(tok, "W") {
		o = h.ow
	}
	switch code {
	case 'a', 'p':
		o.EnqueueAttempt(tok)
	case 'e', 'P':
		o.Enqueued(tok)
	case 'd', 'l':
		h.delivered(o, tok, count, at)
	case 'k', 'b':
		o.AckAttempt(tok)
	case 'K', 'B':
		o.Acked(tok)
	case 'u':
		o.AckAttempt(tok)
		if at, _ := strconv.ParseInt(count, 10, 64); at > h.purgeAt[tok] {
			h.purgeAt[tok] = at
		}
	case 'U':
		o.Acked(tok)
		h.purged++
	case 'x', 'y':
		o.AckFailed(tok)
	case 'R', 'M':
		o.Released(tok)
	case 'z':
		h.fate[tok] = 'z'
	case 'X':
		o.Released(tok)
		h.promise(tok, 'z', 'X')
	case 'D':
		h.deadSeen++
		h.deadListed(tok, count)
	case 'q':
		h.fate[tok] = 'q'
		h.lastDelivery[tok] = 0 // a requeue resets the count; its outcome is open
		// Its next delivery comes after count (here its start); one made
		// before and not reported yet is late.
		if at, _ := strconv.ParseInt(count, 10, 64); at > h.lastAt[tok] {
			h.lastAt[tok] = at
		}
		if at, _ := strconv.ParseInt(count, 10, 64); at > h.requeueAt[tok] {
			h.requeueAt[tok] = at
		}
	case 'Q':
		h.promise(tok, 'q', 'Q')
		h.requeued++
	case 'L':
		h.leaseLost(o, tok, count, at)
	case '!':
		h.violations = append(h.violations, arg)
	}
}

// leaseLost handles an "L" line: a settle of tok's delivery made at at,
// its n-th, was refused with ErrLeaseLost. When that
// delivery is tok's last word (nothing reported since: no later delivery,
// no requeue), its lease ran out: at MaxDeliveries tok is dead from then
// on (fate 'E': the expiry, or the open after a kill that came first,
// dead-letters it), until its next delivery or requeue.
func (h *deadParent) leaseLost(o *fuzz.Oracle, tok, count string, at int64) {
	n, _ := strconv.Atoi(count)
	h.lostSettles++
	last := h.lastAt[tok] == at && h.lastDelivery[tok] == n
	if last {
		o.Released(tok)
	}
	switch f := h.fate[tok]; {
	case last && n >= deadMaxDeliveries && (f == 0 || f == 'z'):
		h.fate[tok] = 'E'
		h.expiredDead++
	case f == 'z':
		h.fate[tok] = 0 // the dead-lettering was refused
	}
}

// promise sets tok's fate to f when the call that returned began after
// every other change of it the child reported: its start line (start) is
// the last word on tok. Lines of different goroutines may reach the
// parent in another order than their calls took effect; a fate is
// promised only when no other line came between the call's two.
func (h *deadParent) promise(tok string, start, f byte) {
	if h.fate[tok] == start {
		h.fate[tok] = f
		return
	}
	h.fate[tok] = 0
}

// delivered checks a delivery's count: at most MaxDeliveries, and more
// than the last one seen. A delivery made (at) before the last one
// reported, or before a requeue of tok, or whose lease ran out before a
// purge of tok started (ranOutBeforePurge), is one whose consumer stalled
// past its lease before reporting it: it is not fed to the oracle (an ack
// of the later delivery, or the purge, may have been reported already),
// and its count is checked against the limit and against the deliveries
// reported in order (lateCount).
func (h *deadParent) delivered(o *fuzz.Oracle, tok, count string, at int64) {
	n, _ := strconv.Atoi(count)
	if n > deadMaxDeliveries {
		h.violate("%s delivered with count %d, past MaxDeliveries %d", tok, n, deadMaxDeliveries)
	}
	if n == deadMaxDeliveries {
		h.atLimit++
	}
	if at < h.lastAt[tok] || h.ranOutBeforePurge(tok, at) {
		h.late++
		h.lateCount(tok, n, at)
		return
	}
	o.Delivered(tok)
	if last := h.lastDelivery[tok]; n <= last {
		h.violate("%s delivered with count %d after a delivery with count %d", tok, n, last)
	}
	h.lastDelivery[tok] = n
	h.lastAt[tok] = at
	h.fate[tok] = 0
}

// lateCount checks the count n of tok's delivery made at at and reported
// late against the last delivery reported in order (lastDelivery, made at
// lastAt), when both are known to count in the same run of deliveries:
// one made after it (ranOutBeforePurge) has a larger count (a requeue
// from the dead set since resets lastDelivery to 0, and its "q" line
// comes before the report of any delivery made after it took effect);
// one made before it, a smaller count, if tok was never requeued from the
// dead set. Once it was, a requeue may take effect between the two
// deliveries, after the time its "q" line gives (its start), and the
// child reports no time of its end: such a late delivery is not compared.
// lateCount changes nothing: the late delivery is not tok's last word.
func (h *deadParent) lateCount(tok string, n int, at int64) {
	last := h.lastDelivery[tok]
	switch {
	case at >= h.lastAt[tok] && n <= last:
		h.violate("%s delivered with count %d after a delivery with count %d", tok, n, last)
	case at < h.lastAt[tok] && h.requeueAt[tok] == 0 && n >= last:
		h.violate("%s delivered with count %d before a delivery with count %d", tok, n, last)
	}
}

// ranOutBeforePurge reports whether the lease of tok's delivery made at
// at ran out before a purge of tok from the dead set started. Such a
// delivery was reported late: its consumer stalled between its Dequeue
// (or Pull) and its report past the lease, the queue's expiry
// dead-lettered the message at MaxDeliveries, which writes no line, and
// the purge took it; the report then comes after the purge returned.
// A delivery made after the purge returned is made after the purge
// started, so its lease (25 ms at least) runs out long after that start,
// lateMargin (the room for the queue's clock and the child's to differ)
// included: it is never excused.
func (h *deadParent) ranOutBeforePurge(tok string, at int64) bool {
	p := h.purgeAt[tok]
	return p != 0 && at+int64(h.lease) <= p+int64(lateMargin)
}

// deadListed checks a dead letter's count against its last delivery's.
func (h *deadParent) deadListed(tok, count string) {
	n, _ := strconv.Atoi(count)
	if last := h.lastDelivery[tok]; n < last {
		h.violations = append(h.violations, fmt.Sprintf("%s dead with count %d after a delivery with count %d", tok, n, last))
	}
}

// deadDrain is what a drain found: every token (dead letters requeued and
// drained), and which were dead.
type deadDrain struct {
	tokens []string
	dead   map[string]bool
	why    map[string]string // a dead letter's deliveries and reason, to explain a failure
}

// check drains a copy of dir with drain, feeds the oracle and checks the
// fates; the fates 'E' against what opened (the dead set of a copy opened
// as the children open it).
func (h *deadParent) check(what string, o *fuzz.Oracle, dir string, drain func(string) (deadDrain, error),
	opened func(string) (map[string]bool, error)) {
	t := h.t
	img := scratchDir(t)
	defer os.RemoveAll(img)
	if err := copyDir(dir, img); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(img, "log")); err != nil {
		return // killed before it opened this queue
	}
	if _, err := queue.Verify(img, nil); err != nil {
		t.Fatalf("%s: Verify: %v", what, err)
	}
	before := scratchDir(t) // the state before the drain, to explain a failure
	defer os.RemoveAll(before)
	if err := copyDir(img, before); err != nil {
		t.Fatal(err)
	}
	appDead := h.expiredDeadAfterOpen(what, img, opened)
	d, err := drain(img)
	if err != nil {
		t.Fatalf("%s: drain: %v", what, err)
	}
	if len(h.violations) > 0 {
		t.Fatalf("%s: %s", what, strings.Join(h.violations, "; "))
	}
	h.deadDrained += len(d.dead)
	drainedSet := make(map[string]bool, len(d.tokens))
	for _, tok := range d.tokens {
		drainedSet[tok] = true
	}
	for tok, f := range h.fate {
		switch {
		case f == 'X' && drainedSet[tok] && !d.dead[tok]:
			t.Logf("log records of %s:\n%s", tok, explainToken(before, tok))
			t.Fatalf("%s: %s was dead-lettered (the call returned) but came back ready", what, tok)
		case f == 'Q' && d.dead[tok]:
			t.Logf("log records of %s:\n%s", tok, explainToken(before, tok))
			t.Fatalf("%s: %s was requeued from the dead set (the call returned) but is dead again (%s)", what, tok, d.why[tok])
		case f == 'E' && drainedSet[tok] && !appDead[tok]:
			t.Logf("log records of %s:\n%s", tok, explainToken(before, tok))
			t.Fatalf("%s: the lease of %s ran out at MaxDeliveries (a settle after its deadline was refused) but the open after the kill left it out of the dead set", what, tok)
		case f == 'E' && appDead[tok]:
			h.expiryChecked++
			if !d.dead[tok] {
				h.expiryByOpen++
			}
		}
	}
	if r := o.Recovered(d.tokens); !r.OK() {
		t.Fatalf("%s: %s", what, r)
	}
}

// expiredDeadAfterOpen returns the dead set that opened finds in a copy
// of img, when a token has fate 'E' (nil otherwise).
func (h *deadParent) expiredDeadAfterOpen(what, img string, opened func(string) (map[string]bool, error)) map[string]bool {
	t := h.t
	if !h.anyFate('E') {
		return nil
	}
	app := scratchDir(t)
	defer os.RemoveAll(app)
	if err := copyDir(img, app); err != nil {
		t.Fatal(err)
	}
	dead, err := opened(app)
	if err != nil {
		t.Fatalf("%s: open as the children do: %v", what, err)
	}
	return dead
}

// anyFate reports whether a token has fate f.
func (h *deadParent) anyFate(f byte) bool {
	for _, g := range h.fate {
		if g == f {
			return true
		}
	}
	return false
}

// appOptions are the options of this cycle's child, which its
// application reopens with: the same sync mode, lease and ManualRequeue.
// The open ends every lease the kill left, whatever ManualRequeue says,
// so nothing is leased after it for the clock to expire.
func (h *deadParent) appOptions() queue.Options {
	return deadOptions(h.sync, h.lease, h.manual)
}

// deadAfterOpen opens the ack queue in dir with the children's options
// and returns its dead letters' tokens.
func (h *deadParent) deadAfterOpen(dir string) (map[string]bool, error) {
	o := h.appOptions()
	q, err := queue.Open(dir, &o)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	dls, err := q.DeadLetters(0, 0)
	dead := make(map[string]bool, len(dls))
	for _, dl := range dls {
		dead[tokenOf(dl.Payload)] = true
	}
	return dead, errors.Join(err, q.Close())
}

// deadValuesAfterOpen does for the windowed queue in dir what
// deadAfterOpen does.
func (h *deadParent) deadValuesAfterOpen(dir string) (map[string]bool, error) {
	o := h.appOptions()
	w, err := queue.OpenWindowed(dir, &queue.WindowOptions{SortedOptions: queue.SortedOptions{Options: o}, Window: deadWindow})
	if err != nil {
		return nil, err
	}
	defer w.Close()
	dvs, err := w.DeadValues(0, 0)
	dead := make(map[string]bool, len(dvs))
	for _, dv := range dvs {
		dead[tokenOf(dv.Payload)] = true
	}
	return dead, errors.Join(err, w.Close())
}

// drainAck opens the ack queue in dir as drainQueue does, checks every
// dead letter (payload, count), requeues them and leases every message,
// checking payloads and counts.
func (h *deadParent) drainAck(dir string) (deadDrain, error) {
	d := deadDrain{dead: make(map[string]bool), why: make(map[string]string)}
	o := drainOptionsAs(deadSegmentSize) // the children's, as their application reopens with
	q, err := queue.Open(dir, &o)
	if err != nil {
		return d, err
	}
	defer q.Close()
	if _, err := q.RequeueExpired(); err != nil {
		return d, err
	}
	dls, err := q.DeadLetters(0, 0)
	if err != nil {
		return d, err
	}
	for _, dl := range dls {
		tok := tokenOf(dl.Payload)
		h.checkPayload("dead letter", tok, dl.Payload)
		if dl.ID != tok {
			h.violate("dead letter %s has id %q", tok, dl.ID)
		}
		h.deadListed(tok, strconv.Itoa(dl.Deliveries))
		d.dead[tok] = true
		d.why[tok] = fmt.Sprintf("%d deliveries, reason %q", dl.Deliveries, dl.Reason)
	}
	if n, err := q.RequeueAllDead(); err != nil || n != len(dls) {
		return d, fmt.Errorf("RequeueAllDead = %d, %v; %d dead letters", n, err, len(dls))
	}
	for {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		if err != nil {
			return d, err
		}
		tok := tokenOf(m.Payload)
		h.checkPayload("drained message", tok, m.Payload)
		if d.dead[tok] {
			if m.Deliveries != 1 {
				h.violate("%s requeued from the dead set, delivered with count %d", tok, m.Deliveries)
			}
		} else if last := h.lastDelivery[tok]; m.Deliveries <= last {
			h.violate("%s drained with count %d after a delivery with count %d", tok, m.Deliveries, last)
		} else {
			h.cutOffCheck(tok, m.Deliveries)
		}
		d.tokens = append(d.tokens, tok)
	}
	return d, q.Close()
}

// drainWindowed does for the windowed queue in dir what drainAck does.
func (h *deadParent) drainWindowed(dir string) (deadDrain, error) {
	d := deadDrain{dead: make(map[string]bool), why: make(map[string]string)}
	o := drainOptionsAs(deadSegmentSize) // the children's, as their application reopens with
	w, err := queue.OpenWindowed(dir, &queue.WindowOptions{SortedOptions: queue.SortedOptions{Options: o}, Window: deadWindow})
	if err != nil {
		return d, err
	}
	defer w.Close()
	if _, err := w.RequeueExpired(); err != nil {
		return d, err
	}
	dvs, err := w.DeadValues(0, 0)
	if err != nil {
		return d, err
	}
	for _, dv := range dvs {
		tok := tokenOf(dv.Payload)
		h.checkPayload("dead value", tok, dv.Payload)
		h.deadListed(tok, strconv.Itoa(dv.Deliveries))
		d.dead[tok] = true
		d.why[tok] = fmt.Sprintf("%d deliveries, reason %q", dv.Deliveries, dv.Reason)
	}
	if n, err := w.RequeueAllDead(); err != nil || n != len(dvs) {
		return d, fmt.Errorf("RequeueAllDead = %d, %v; %d dead values", n, err, len(dvs))
	}
	for {
		bs, err := w.TryPull(1024)
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		if err != nil {
			return d, err
		}
		for _, b := range bs {
			for _, v := range b.Values {
				tok := tokenOf(v.Payload)
				h.checkPayload("drained value", tok, v.Payload)
				if !d.dead[tok] {
					if last := h.lastDelivery[tok]; v.Deliveries <= last {
						h.violate("%s drained with count %d after a pull with count %d", tok, v.Deliveries, last)
					}
					h.cutOffCheck(tok, v.Deliveries)
				}
				d.tokens = append(d.tokens, tok)
			}
		}
	}
	return d, w.Close()
}

// cutOffCheck ends the promise of a requeue from the dead set (fate 'Q')
// when the drain delivers tok with a count that shows a delivery since
// the last one reported (n > last+1, the drain's own delivery being the
// +1): the child was killed between a Pull (or DequeueBatch) that
// returned and its report of the delivery ("l", "d"), which it writes
// only once the call returned. That delivery is tok's next one, after
// which the requeue promises nothing: the open after the kill ends its
// lease keeping the count, and once such cut-off deliveries reach
// MaxDeliveries an open dead-letters tok ("process crashed while the
// batch was leased") with no line of the child's about it. Every other
// check stands: a reported delivery ended the promise already, and a
// requeue the queue lost would leave tok dead, never drained with a
// count above its last.
func (h *deadParent) cutOffCheck(tok string, n int) {
	if n > h.lastDelivery[tok]+1 && h.fate[tok] == 'Q' {
		h.fate[tok] = 0
		h.cutOff++
	}
}

func (h *deadParent) violate(format string, args ...any) {
	h.violations = append(h.violations, fmt.Sprintf(format, args...))
}

func (h *deadParent) checkPayload(what, tok string, p []byte) {
	if err := deadPayloadErr(tok, p); err != nil {
		h.violate("%s: %v", what, err)
	}
}

// deadPayload returns the payload of tok, a token that ends with its
// padding: "<name>-<pad>".
func deadPayload(tok string) []byte {
	i := strings.LastIndexByte(tok, '-')
	pad, err := strconv.Atoi(tok[i+1:])
	if i < 0 || err != nil {
		return nil
	}
	return payload(tok, pad)
}

// deadPayloadErr says how p differs from the payload tok was sent with.
func deadPayloadErr(tok string, p []byte) error {
	want := deadPayload(tok)
	if want == nil || !bytes.Equal(p, want) {
		return fmt.Errorf("%s: payload of %d bytes %.40q, want %d bytes", tok, len(p), p, len(want))
	}
	return nil
}

// deadWindow is the windowed queue's window.
const deadWindow = 3 * time.Millisecond

// deadSegmentSize is the children's SegmentSize: small, so that they roll.
const deadSegmentSize = 16 << 10

// deadChild is the child side of TestKill9Dead.
type deadChild struct {
	cfg *childConfig
	rep *reporter
	q   *queue.Queue
	w   *queue.Windowed
	// gateQ and gateW are held shared by what can add to a dead set
	// (deliveries and settles) and exclusively by PurgeAllDead and
	// RequeueAllDead, so that the child knows which letters those take.
	gateQ, gateW sync.RWMutex
	leased       sync.Map      // token -> int64: the time (unix ns) of its delivery not settled yet
	lease        time.Duration // AckTimeout: a delivery's deadline is its time plus lease
}

// deadOptions are the children's queue options: lease is AckTimeout;
// manual is ManualRequeue.
func deadOptions(sync int, lease time.Duration, manual bool) queue.Options {
	return queue.Options{Sync: queue.SyncMode(sync), SegmentSize: deadSegmentSize, SnapshotBytes: 48 << 10,
		AckTimeout: lease, MaxDeliveries: deadMaxDeliveries, ManualRequeue: manual}
}

// lateMargin is how long after a delivery's deadline a settle must start
// for the child to require ErrLeaseLost of it, and how long before the
// deadline a settle must return for the child to forbid it: room for the
// queue's reading of the clock (a wall-clock base at most a millisecond
// old plus the monotonic time since) to differ from time.Now.
const lateMargin = 5 * time.Millisecond

func runDeadChild(cfg *childConfig) {
	c := &deadChild{cfg: cfg, rep: newReporter(), lease: time.Minute}
	if cfg.Lease > 0 {
		c.lease = cfg.Lease
	}
	go func() {
		time.Sleep(cfg.Lifetime)
		os.Exit(0)
	}()
	o := deadOptions(cfg.Sync, c.lease, cfg.Manual)
	testhook.SetSnapshotStep(&o, (&kill9Child{cfg: cfg, rep: c.rep}).step)
	var err error
	if c.q, err = queue.Open(cfg.Dir, &o); err != nil {
		c.rep.failf("open ack queue: %v", err)
		os.Exit(2)
	}
	if c.w, err = queue.OpenWindowed(cfg.Sorted, &queue.WindowOptions{SortedOptions: queue.SortedOptions{Options: o}, Window: deadWindow}); err != nil {
		c.rep.failf("open windowed queue: %v", err)
		os.Exit(2)
	}
	for i := range 2 {
		go c.produce(i)
		go c.consume(i)
	}
	go c.publish()
	go c.pull()
	go c.housekeepWindowed()
	c.housekeepAck()
}

func (c *deadChild) rng(i int) *rand.Rand { return rand.New(rand.NewPCG(c.cfg.Seed, uint64(i))) }

// hold notes that tok was delivered at at (unix ns). Two deliveries of
// tok whose leases overlap are a violation: the later one must be made at
// or after the earlier one's deadline. The later one is kept; the other
// may be reported after it, by a consumer that stalled past its lease.
func (c *deadChild) hold(tok string, at int64) {
	for {
		v, held := c.leased.LoadOrStore(tok, at)
		if !held {
			return
		}
		other := v.(int64)
		if first, second := min(at, other), max(at, other); second < first+int64(c.lease) {
			c.rep.failf("%s delivered at %d while the lease of its delivery at %d (until %d) is held", tok, second, first, first+int64(c.lease))
		}
		if at <= other || c.leased.CompareAndSwap(tok, other, at) {
			return
		}
	}
}

// release ends the hold of tok's delivery at at, when no later one
// replaced it.
func (c *deadChild) release(tok string, at int64) { c.leased.CompareAndDelete(tok, at) }

// outcome is what became of a settle, as judged by judge.
type outcome int

const (
	settled outcome = iota // it returned nil: a settle of record
	lost                   // refused with ErrLeaseLost, started late enough for it
	failed                 // anything else, reported as a violation
)

// judge runs a settle (or Extend) of a delivery whose lease runs out at
// due (unix ns) and judges its outcome by the queue's reading of the
// clock, which it takes inside the call, so between the call's start and
// its return: a call started more than lateMargin after the deadline
// must fail with ErrLeaseLost, and one that returned more than lateMargin
// before the deadline must not. A call that waits (for the queue's lock,
// or for a CPU under load) may start before the deadline and read the
// clock after it; judged by its return it is never a false violation.
func (c *deadChild) judge(due int64, what string, call func() error) outcome {
	start := time.Now().UnixNano()
	err := call()
	end := time.Now().UnixNano()
	switch {
	case err == nil && start > due+int64(lateMargin):
		c.rep.failf("%s started %v after its lease ran out, and returned nil", what, time.Duration(start-due))
		return failed
	case err == nil:
		return settled
	case !errors.Is(err, queue.ErrLeaseLost):
		c.rep.failf("%s: %v", what, err)
		return failed
	case end < due-int64(lateMargin):
		c.rep.failf("%s returned %v before its lease runs out (it took %v): %v", what, time.Duration(due-end), time.Duration(end-start), err)
		return failed
	}
	return lost
}

// leaseLost reports settles of toks refused with ErrLeaseLost: their
// deliveries, the n-th, made at at.
func (c *deadChild) leaseLost(at int64, toks []string, counts []int) {
	lines := make([]string, len(toks))
	for i, tok := range toks {
		lines[i] = fmt.Sprintf("%s %d %d", tok, counts[i], at)
	}
	c.rep.line('L', lines...)
}

// overstay decides, with short leases only, whether a consumer holds
// deliveries made at at past their deadline (it then sleeps until after
// it and reports true) or about until it (a settle then may or may not
// beat the expiry), or settles them at once.
func (c *deadChild) overstay(rng *rand.Rand, at int64) bool {
	if c.cfg.Lease == 0 {
		return false
	}
	due := time.Unix(0, at+int64(c.lease))
	switch r := rng.IntN(100); {
	case r < 15:
		time.Sleep(time.Until(due) + lateMargin + time.Duration(rng.IntN(5000))*time.Microsecond)
		return true
	case r < 30:
		time.Sleep(time.Until(due) + time.Duration(rng.Int64N(int64(c.lease))) - c.lease/2)
	}
	return false
}

// extendLate tries, after the deadline, to extend a lease that ran out:
// it must fail with ErrLeaseLost.
func (c *deadChild) extendLate(rng *rand.Rand, due int64, what string, extend func(time.Duration) error) {
	if rng.IntN(3) == 0 && time.Now().UnixNano() > due+int64(lateMargin) {
		c.judge(due, "extend of "+what, func() error { return extend(c.lease) })
	}
}

func (c *deadChild) produce(i int) {
	rng := c.rng(10 + i)
	for n := 0; ; n++ {
		if st := c.q.Stats(); st.Ready+st.InFlight+st.Dead > 200 {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		tok := fmt.Sprintf("A%d.%d.%d-%d", c.cfg.Cycle, i, n, rng.IntN(300))
		c.rep.line('a', tok)
		if _, err := c.q.Enqueue(context.Background(), deadPayload(tok), queue.WithID(tok)); err != nil {
			c.rep.failf("enqueue %s: %v", tok, err)
			continue
		}
		c.rep.line('e', tok)
	}
}

func (c *deadChild) consume(i int) {
	rng := c.rng(20 + i)
	for {
		c.gateQ.RLock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		ms, err := c.q.DequeueBatch(ctx, 1+rng.IntN(4))
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			c.rep.failf("dequeue: %v", err)
		}
		for _, m := range ms {
			c.deliveredMessage(m)
		}
		late := len(ms) > 0 && c.overstay(rng, ms[0].DeliveredAt.UnixNano())
		for _, m := range ms {
			if late {
				c.extendLate(rng, c.due(m.DeliveredAt), m.ID, m.Extend)
			}
			c.handle(rng, m)
		}
		c.gateQ.RUnlock()
	}
}

func (c *deadChild) deliveredMessage(m *queue.Message) {
	tok := tokenOf(m.Payload)
	if err := deadPayloadErr(tok, m.Payload); err != nil {
		c.rep.failf("delivered: %v", err)
	}
	if m.ID != tok {
		c.rep.failf("%s delivered with id %q", tok, m.ID)
	}
	at := m.DeliveredAt.UnixNano()
	c.hold(tok, at)
	c.rep.line('d', fmt.Sprintf("%s %d %d", tok, m.Deliveries, at))
}

// due returns the deadline (unix ns) of a delivery made at at.
func (c *deadChild) due(at time.Time) int64 { return at.UnixNano() + int64(c.lease) }

// handle acks, nacks or dead-letters a delivery; with MaxDeliveries 2 a
// second nack dead-letters too.
func (c *deadChild) handle(rng *rand.Rand, m *queue.Message) {
	tok, at, due := tokenOf(m.Payload), m.DeliveredAt.UnixNano(), c.due(m.DeliveredAt)
	c.release(tok, at)
	var what byte // the line of a settle of record
	var o outcome
	switch r := rng.IntN(100); {
	case r < 30:
		c.rep.line('k', tok)
		if o = c.judge(due, "ack "+tok, m.Ack); o == lost {
			c.rep.line('x', tok)
		}
		what = 'K'
	case r < 75:
		if m.Deliveries >= 2 {
			c.rep.line('z', tok)
		}
		o = c.judge(due, "nack "+tok, func() error { return m.Nack(0) })
		what = map[bool]byte{true: 'X', false: 'R'}[m.Deliveries >= 2]
	default:
		c.rep.line('z', tok)
		o = c.judge(due, "dead-letter "+tok, func() error { return m.DeadLetter("kill9 dead test") })
		what = 'X'
	}
	switch o {
	case settled:
		c.rep.line(what, tok)
	case lost:
		c.leaseLost(at, []string{tok}, []int{m.Deliveries})
	}
}

// housekeepAck lists, requeues and purges the ack queue's dead letters,
// and compacts both queues.
func (c *deadChild) housekeepAck() {
	rng := c.rng(40)
	for {
		time.Sleep(time.Duration(5+rng.IntN(30)) * time.Millisecond)
		c.requeueExpired(rng, "ack queue", c.q.RequeueExpired)
		switch r := rng.IntN(100); {
		case r < 45:
			c.requeueOrPurge(rng)
		case r < 60:
			c.allDead(rng.IntN(2) == 0)
		default:
			if err := c.q.Compact(); err != nil {
				c.rep.failf("compact ack queue: %v", err)
			}
		}
	}
}

// requeueExpired ends, now and then, the leases that ran out, when the
// queues leave that to the child (ManualRequeue): until then a lease that
// ran out stays in the log, its settles refused, for a kill to find.
func (c *deadChild) requeueExpired(rng *rand.Rand, what string, requeue func() (int, error)) {
	if c.cfg.Manual && rng.IntN(3) == 0 {
		c.endExpired(what, requeue)
	}
}

// endExpired ends, with short leases, the leases that ran out, before a
// listing of the dead set that a call taking all of it must match. The
// consumers are held off then, so every lease left ran out (its settle
// was refused); ended now, none dead-letters its message between the
// listing and the call, as the queue's own expiry could.
func (c *deadChild) endExpired(what string, requeue func() (int, error)) {
	if c.cfg.Lease == 0 {
		return
	}
	if _, err := requeue(); err != nil {
		c.rep.failf("requeue expired, %s: %v", what, err)
	}
}

// listDead lists the ack queue's dead letters and checks them.
func (c *deadChild) listDead() []queue.DeadLetter {
	dls, err := c.q.DeadLetters(0, 0)
	if err != nil {
		c.rep.failf("dead letters: %v", err)
	}
	for _, dl := range dls {
		tok := tokenOf(dl.Payload)
		if err := deadPayloadErr(tok, dl.Payload); err != nil {
			c.rep.failf("dead letter %s (%s): %v", dl.ID, dl.Reason, err)
		}
		if dl.ID != tok {
			c.rep.failf("dead letter %s has id %q", tok, dl.ID)
		}
		c.rep.line('D', fmt.Sprintf("%s %d", tok, dl.Deliveries))
	}
	return dls
}

// requeueOrPurge requeues or purges a few dead letters one by one.
func (c *deadChild) requeueOrPurge(rng *rand.Rand) {
	dls := c.listDead()
	for _, dl := range dls {
		switch rng.IntN(3) {
		case 0:
			c.rep.line('q', stamped(dl.ID)...)
			if err := c.q.RequeueDead(dl.ID); err != nil {
				c.rep.failf("requeue dead %s: %v", dl.ID, err)
				continue
			}
			c.rep.line('Q', dl.ID)
		case 1:
			c.rep.line('u', stamped(dl.ID)...)
			if err := c.q.PurgeDead(dl.ID); err != nil {
				c.rep.failf("purge dead %s: %v", dl.ID, err)
				continue
			}
			c.rep.line('U', dl.ID)
		}
	}
}

// allDead requeues or purges every dead letter of the ack queue, with the
// consumers held off so that the listing names what the call takes.
func (c *deadChild) allDead(purge bool) {
	c.gateQ.Lock()
	defer c.gateQ.Unlock()
	c.endExpired("ack queue", c.q.RequeueExpired)
	dls := c.listDead()
	toks := make([]string, len(dls))
	for i, dl := range dls {
		toks[i] = dl.ID
	}
	c.takeAllDead(toks, purge, c.q.PurgeAllDead, c.q.RequeueAllDead)
}

// takeAllDead purges (purge) or requeues every dead letter or value,
// toks as listed, reporting them before and after the call, which must
// take all of them.
func (c *deadChild) takeAllDead(toks []string, purge bool, purgeAll, requeueAll func() (int, error)) {
	name, call, before, after := "RequeueAllDead", requeueAll, byte('q'), byte('Q')
	if purge {
		name, call, before, after = "PurgeAllDead", purgeAll, 'u', 'U'
	}
	c.rep.line(before, stamped(toks...)...)
	n, err := call()
	if err != nil || n != len(toks) {
		c.rep.failf("%s = %d, %v; %d listed", name, n, err, len(toks))
		return
	}
	c.rep.line(after, toks...)
}

// stamped returns toks with the time (unix ns) appended to each: the
// arguments of "q" and "u" lines.
func stamped(toks ...string) []string {
	now := time.Now().UnixNano()
	out := make([]string, len(toks))
	for i, tok := range toks {
		out[i] = fmt.Sprintf("%s %d", tok, now)
	}
	return out
}

func (c *deadChild) publish() {
	rng, ctx := c.rng(30), context.Background()
	for n := 0; ; n++ {
		if st := c.w.Stats(); st.SortedPending+st.SortedLeased+st.SortedDead > 200 {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		tok := fmt.Sprintf("W%d.%d-%d", c.cfg.Cycle, n, rng.IntN(200))
		c.rep.line('p', tok)
		if err := c.w.Publish(ctx, fmt.Sprintf("k%d", rng.IntN(6)), deadPayload(tok)); err != nil {
			c.rep.failf("publish %s: %v", tok, err)
			continue
		}
		c.rep.line('P', tok)
	}
}

func (c *deadChild) pull() {
	rng := c.rng(31)
	for {
		c.gateW.RLock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		bs, err := c.w.Pull(ctx, 1+rng.IntN(8))
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			c.rep.failf("pull: %v", err)
		}
		for _, b := range bs {
			c.pulledBatch(b)
		}
		late := len(bs) > 0 && c.overstay(rng, bs[0].PulledAt.UnixNano())
		for _, b := range bs {
			if late {
				c.extendLate(rng, c.due(b.PulledAt), "batch "+b.Key, b.Extend)
			}
			c.settleBatch(rng, b)
		}
		c.gateW.RUnlock()
	}
}

// pulledBatch checks a pulled batch and reports its values' deliveries.
func (c *deadChild) pulledBatch(b *queue.Batch[time.Time]) {
	at := b.PulledAt.UnixNano()
	for _, v := range b.Values {
		tok := tokenOf(v.Payload)
		if err := deadPayloadErr(tok, v.Payload); err != nil {
			c.rep.failf("pulled: %v", err)
		}
		c.hold(tok, at)
		c.rep.line('l', fmt.Sprintf("%s %d %d", tok, v.Deliveries, at))
	}
}

// settleBatch acks, nacks or dead-letters a pulled batch.
func (c *deadChild) settleBatch(rng *rand.Rand, b *queue.Batch[time.Time]) {
	at, due := b.PulledAt.UnixNano(), c.due(b.PulledAt)
	toks, counts := make([]string, len(b.Values)), make([]int, len(b.Values))
	var dead []string // what a nack sends to the dead set
	for j, v := range b.Values {
		toks[j], counts[j] = tokenOf(v.Payload), v.Deliveries
		c.release(toks[j], at)
		if v.Deliveries >= 2 {
			dead = append(dead, toks[j])
		}
	}
	var o outcome
	switch r := rng.IntN(100); {
	case r < 35:
		c.rep.line('b', toks...)
		if o = c.judge(due, "batch ack", b.Ack); o == settled {
			c.rep.line('B', toks...)
		} else if o == lost {
			c.rep.line('y', toks...)
		}
	case r < 80:
		if len(dead) > 0 {
			c.rep.line('z', dead...)
		}
		if o = c.judge(due, "batch nack", func() error { return b.Nack(0) }); o == settled {
			c.rep.line('M', toks...)
			if len(dead) > 0 {
				c.rep.line('X', dead...)
			}
		}
	default:
		c.rep.line('z', toks...)
		if o = c.judge(due, "batch dead-letter", func() error { return b.DeadLetter("kill9 dead test") }); o == settled {
			c.rep.line('X', toks...)
		}
	}
	if o == lost {
		c.leaseLost(at, toks, counts)
	}
}

// housekeepWindowed lists, requeues and purges the windowed queue's dead
// values, one by one or all at once.
func (c *deadChild) housekeepWindowed() {
	rng := c.rng(41)
	for {
		time.Sleep(time.Duration(5+rng.IntN(30)) * time.Millisecond)
		c.requeueExpired(rng, "windowed queue", c.w.RequeueExpired)
		switch r := rng.IntN(100); {
		case r < 50:
			c.requeueOrPurgeValues(rng)
		case r < 70:
			c.allDeadValues(rng.IntN(2) == 0)
		default:
			if err := c.w.Compact(); err != nil {
				c.rep.failf("compact windowed queue: %v", err)
			}
		}
	}
}

func (c *deadChild) listDeadValues() []queue.DeadValue[time.Time] {
	dvs, err := c.w.DeadValues(0, 0)
	if err != nil {
		c.rep.failf("dead values: %v", err)
	}
	for _, dv := range dvs {
		tok := tokenOf(dv.Payload)
		if err := deadPayloadErr(tok, dv.Payload); err != nil {
			c.rep.failf("dead value %d (%s): %v", dv.Seq, dv.Reason, err)
		}
		c.rep.line('D', fmt.Sprintf("%s %d", tok, dv.Deliveries))
	}
	return dvs
}

func (c *deadChild) requeueOrPurgeValues(rng *rand.Rand) {
	for _, dv := range c.listDeadValues() {
		tok := tokenOf(dv.Payload)
		switch rng.IntN(3) {
		case 0:
			c.rep.line('q', stamped(tok)...)
			if err := c.w.RequeueDeadValue(dv); err != nil {
				c.rep.failf("requeue dead value %s: %v", tok, err)
				continue
			}
			c.rep.line('Q', tok)
		case 1:
			c.rep.line('u', stamped(tok)...)
			if err := c.w.PurgeDeadValue(dv); err != nil {
				c.rep.failf("purge dead value %s: %v", tok, err)
				continue
			}
			c.rep.line('U', tok)
		}
	}
}

func (c *deadChild) allDeadValues(purge bool) {
	c.gateW.Lock()
	defer c.gateW.Unlock()
	c.endExpired("windowed queue", c.w.RequeueExpired)
	dvs := c.listDeadValues()
	toks := make([]string, len(dvs))
	for i, dv := range dvs {
		toks[i] = tokenOf(dv.Payload)
	}
	c.takeAllDead(toks, purge, c.w.PurgeAllDead, c.w.RequeueAllDead)
}
