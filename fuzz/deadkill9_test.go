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
//     requeue from the dead set, and each delivery counts one more;
//   - a dead-lettering that returned keeps the message dead, and a
//     requeue from the dead set that returned keeps it out of the dead
//     set, until its next delivery (one the kill kept the child from
//     reporting included: see cutOffCheck);
//   - a consumer never holds a message another consumer holds (leases
//     run for a minute: none runs out in a child's life).
//
// Short run: 12 cycles (40 without -short). Long run:
//
//	WALQ_DEAD_CYCLES=1000 go test ./fuzz -run '^TestKill9Dead$' -timeout 2h -v
func TestKill9Dead(t *testing.T) {
	if cfg := childConfigFromEnv(t, "kill9dead"); cfg != nil {
		runDeadChild(cfg)
		return
	}
	def := 40
	if testing.Short() {
		def = 12
	}
	cycles := envInt(t, "WALQ_DEAD_CYCLES", def)
	rng, _ := testRand(t)
	h := &deadParent{t: t, rng: rng, dirA: t.TempDir(), dirW: t.TempDir(),
		oa: fuzz.NewOracle(), ow: fuzz.NewOracle(),
		lastDelivery: make(map[string]int), fate: make(map[string]byte)}
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
}

// Report codes of this test's child, beside child_test.go's ("d" and "l"
// carry the delivery count: "d <token> <n>"):
//
//	D  "D <token> <n>": listed in the dead set with n deliveries, payload checked
//	z  a call that dead-letters started (DeadLetter, or a nack at MaxDeliveries)
//	X  it returned: dead until its next delivery or requeue
//	q  requeue from the dead set started    Q  it returned success
//	u  a purge from the dead set started    U  it returned success (an ack, to the oracle)

// deadParent is the parent side of TestKill9Dead.
type deadParent struct {
	t            *testing.T
	rng          *rand.Rand
	dirA, dirW   string       // the ack queue's and the windowed queue's directories
	oa, ow       *fuzz.Oracle // their oracles
	lastDelivery map[string]int
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
}

func (h *deadParent) cycle(n int) {
	t := h.t
	cfg := childConfig{Mode: "kill9dead", Dir: h.dirA, Sorted: h.dirW, Cycle: n, Seed: h.rng.Uint64(),
		Sync: pickSync(h.rng), Lifetime: time.Minute}
	if h.rng.IntN(5) == 0 {
		cfg.DieAt = snapshotSteps[h.rng.IntN(len(snapshotSteps))]
	}
	run := time.Duration(h.rng.Int64N(int64(maxRun)))
	if raceEnabled {
		run *= 3
	}
	c := startChild(t, "TestKill9Dead", cfg)
	timer := time.NewTimer(run)
	defer timer.Stop()
	for lines := c.lines; lines != nil; {
		select {
		case l, ok := <-lines:
			if !ok {
				lines = nil
				continue
			}
			h.apply(l)
		case <-timer.C:
			c.kill()
		}
	}
	<-c.done
	what := fmt.Sprintf("cycle %d (sync %d, die at %q, killed after %v)", n, cfg.Sync, cfg.DieAt, run)
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
	h.check(what+", ack queue", h.oa, h.dirA, h.drainAck)
	h.check(what+", windowed queue", h.ow, h.dirW, h.drainWindowed)
}

// apply feeds one report line to the oracles and to the checks of delivery
// counts and fates.
func (h *deadParent) apply(l string) {
	if len(l) < 2 {
		return
	}
	code, arg := l[0], l[2:]
	tok, count, _ := strings.Cut(arg, " ")
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
		o.Delivered(tok)
		h.delivered(tok, count)
	case 'k', 'b':
		o.AckAttempt(tok)
	case 'K', 'B':
		o.Acked(tok)
	case 'u':
		o.AckAttempt(tok)
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
	case 'Q':
		h.promise(tok, 'q', 'Q')
		h.requeued++
	case '!':
		h.violations = append(h.violations, arg)
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

// delivered checks a delivery's count: one more than the last one seen.
func (h *deadParent) delivered(tok, count string) {
	n, _ := strconv.Atoi(count)
	if last := h.lastDelivery[tok]; n <= last {
		h.violations = append(h.violations, fmt.Sprintf("%s delivered with count %d after a delivery with count %d", tok, n, last))
	}
	h.lastDelivery[tok] = n
	h.fate[tok] = 0
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
// fates.
func (h *deadParent) check(what string, o *fuzz.Oracle, dir string, drain func(string) (deadDrain, error)) {
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
		}
	}
	if r := o.Recovered(d.tokens); !r.OK() {
		t.Fatalf("%s: %s", what, r)
	}
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
	leased       sync.Map // token -> struct{}: delivered and not settled
}

func runDeadChild(cfg *childConfig) {
	c := &deadChild{cfg: cfg, rep: newReporter()}
	go func() {
		time.Sleep(cfg.Lifetime)
		os.Exit(0)
	}()
	o := queue.Options{Sync: queue.SyncMode(cfg.Sync), SegmentSize: deadSegmentSize, SnapshotBytes: 48 << 10,
		AckTimeout: time.Minute, MaxDeliveries: 2}
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

// lease notes that tok was delivered; a token delivered while held is a
// violation.
func (c *deadChild) lease(tok string) {
	if _, held := c.leased.LoadOrStore(tok, struct{}{}); held {
		c.rep.failf("%s delivered while its lease is held", tok)
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
		for _, m := range ms {
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
	c.lease(tok)
	c.rep.line('d', fmt.Sprintf("%s %d", tok, m.Deliveries))
}

// handle acks, nacks or dead-letters a delivery; with MaxDeliveries 2 a
// second nack dead-letters too.
func (c *deadChild) handle(rng *rand.Rand, m *queue.Message) {
	tok := tokenOf(m.Payload)
	c.leased.Delete(tok)
	switch r := rng.IntN(100); {
	case r < 30:
		c.rep.line('k', tok)
		if err := m.Ack(); err != nil {
			c.rep.failf("ack %s: %v", tok, err)
			return
		}
		c.rep.line('K', tok)
	case r < 75:
		if m.Deliveries >= 2 {
			c.rep.line('z', tok)
		}
		if err := m.Nack(0); err != nil {
			c.rep.failf("nack %s: %v", tok, err)
			return
		}
		c.rep.line(map[bool]byte{true: 'X', false: 'R'}[m.Deliveries >= 2], tok)
	default:
		c.rep.line('z', tok)
		if err := m.DeadLetter("kill9 dead test"); err != nil {
			c.rep.failf("dead-letter %s: %v", tok, err)
			return
		}
		c.rep.line('X', tok)
	}
}

// housekeepAck lists, requeues and purges the ack queue's dead letters,
// and compacts both queues.
func (c *deadChild) housekeepAck() {
	rng := c.rng(40)
	for {
		time.Sleep(time.Duration(5+rng.IntN(30)) * time.Millisecond)
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
			c.rep.line('q', dl.ID)
			if err := c.q.RequeueDead(dl.ID); err != nil {
				c.rep.failf("requeue dead %s: %v", dl.ID, err)
				continue
			}
			c.rep.line('Q', dl.ID)
		case 1:
			c.rep.line('u', dl.ID)
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
	c.rep.line(before, toks...)
	n, err := call()
	if err != nil || n != len(toks) {
		c.rep.failf("%s = %d, %v; %d listed", name, n, err, len(toks))
		return
	}
	c.rep.line(after, toks...)
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
			c.settleBatch(rng, b)
		}
		c.gateW.RUnlock()
	}
}

// settleBatch checks a pulled batch and acks, nacks or dead-letters it.
func (c *deadChild) settleBatch(rng *rand.Rand, b *queue.Batch[time.Time]) {
	toks := make([]string, len(b.Values))
	var dead []string // what a nack sends to the dead set
	for j, v := range b.Values {
		toks[j] = tokenOf(v.Payload)
		if err := deadPayloadErr(toks[j], v.Payload); err != nil {
			c.rep.failf("pulled: %v", err)
		}
		c.lease(toks[j])
		c.rep.line('l', fmt.Sprintf("%s %d", toks[j], v.Deliveries))
		if v.Deliveries >= 2 {
			dead = append(dead, toks[j])
		}
	}
	for _, tok := range toks {
		c.leased.Delete(tok)
	}
	switch r := rng.IntN(100); {
	case r < 35:
		c.rep.line('b', toks...)
		if err := b.Ack(); err != nil {
			c.rep.failf("batch ack: %v", err)
			return
		}
		c.rep.line('B', toks...)
	case r < 80:
		if len(dead) > 0 {
			c.rep.line('z', dead...)
		}
		if err := b.Nack(0); err != nil {
			c.rep.failf("batch nack: %v", err)
			return
		}
		c.rep.line('M', toks...)
		if len(dead) > 0 {
			c.rep.line('X', dead...)
		}
	default:
		c.rep.line('z', toks...)
		if err := b.DeadLetter("kill9 dead test"); err != nil {
			c.rep.failf("batch dead-letter: %v", err)
			return
		}
		c.rep.line('X', toks...)
	}
}

// housekeepWindowed lists, requeues and purges the windowed queue's dead
// values, one by one or all at once.
func (c *deadChild) housekeepWindowed() {
	rng := c.rng(41)
	for {
		time.Sleep(time.Duration(5+rng.IntN(30)) * time.Millisecond)
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
			c.rep.line('q', tok)
			if err := c.w.RequeueDeadValue(dv); err != nil {
				c.rep.failf("requeue dead value %s: %v", tok, err)
				continue
			}
			c.rep.line('Q', tok)
		case 1:
			c.rep.line('u', tok)
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
	dvs := c.listDeadValues()
	toks := make([]string, len(dvs))
	for i, dv := range dvs {
		toks[i] = tokenOf(dv.Payload)
	}
	c.takeAllDead(toks, purge, c.w.PurgeAllDead, c.w.RequeueAllDead)
}
