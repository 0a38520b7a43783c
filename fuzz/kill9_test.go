package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/walq/walq/fuzz"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// snapshotSteps are the names recovery.Write passes to the snapshot hook
// (testhook.SetSnapshotStep).
var snapshotSteps = []string{"written", "synced", "renamed", "dir-synced", "removed"}

// TestKill9 runs a child process with concurrent producers and consumers on
// an ack queue and on a sorted queue, SIGKILLs it at a random moment (or
// lets it kill itself at a snapshot step), checks the recovered queues with
// the oracle on a copy of their directories, and repeats on the same
// directories. The last cycle drains the directories themselves.
//
// Short run: 100 cycles (25 under -race). Long run:
//
//	WALQ_CRASH_CYCLES=1000 go test ./fuzz -run '^TestKill9$' -timeout 2h -v
func TestKill9(t *testing.T) {
	runKill9(t, kill9Defaults, envInt(t, "WALQ_CRASH_CYCLES", scaled(100, 4)))
}

// kill9Options are the options the kill -9 children open their queues
// with.
type kill9Options struct {
	SegmentSize   int64         // bytes; the drains open with it too
	SnapshotBytes int64         // log bytes between automatic snapshots
	AckTimeout    time.Duration // a lease's length
	DedupWindow   time.Duration // how long a producer id is remembered (0: not at all)
	MaxDeliveries int           // the ack queue's (the sorted queue has none)
	ManyFlights   bool          // the sorted queue without SingleFlight
}

// kill9Defaults are TestKill9's: segments small enough to roll, a
// snapshot every 128 KiB, and leases longer than a child lives (maxRun;
// not under -race), which the open after the kill ends.
var kill9Defaults = kill9Options{SegmentSize: 32 << 10, SnapshotBytes: 128 << 10,
	AckTimeout: 400 * time.Millisecond, MaxDeliveries: 4}

// runKill9 runs TestKill9's loop for cycles cycles, the children (the
// test t, run again) opening their queues with opts.
func runKill9(t *testing.T, opts kill9Options, cycles int) {
	if cfg := childConfigFromEnv(t, "kill9"); cfg != nil {
		runKill9Child(cfg)
		return
	}
	rng, _ := testRand(t)
	h := &kill9Parent{t: t, rng: rng, opts: opts, dirA: t.TempDir(), dirB: t.TempDir(),
		oa: fuzz.NewOracle(), ob: fuzz.NewOracle(), stepKills: make(map[string]int), syncs: make(map[int]int)}
	start := time.Now()
	for cycle := 1; cycle <= cycles; cycle++ {
		h.cycle(cycle)
	}
	h.finalDrain()
	h.summary(cycles, time.Since(start))
}

// kill9Parent is the parent side of TestKill9.
type kill9Parent struct {
	t          *testing.T
	rng        *rand.Rand
	opts       kill9Options // the children's options
	dirA, dirB string       // the ack queue's and the sorted queue's directories
	oa, ob     *fuzz.Oracle // their oracles
	recA, recB []time.Duration
	stepKills  map[string]int            // cycles that ended at a snapshot step, by step
	syncs      map[int]int               // cycles by sync mode
	violations []string                  // "!" lines
	hist       map[string]string         // this cycle's report codes by token, to explain a failure
	ackedAt    map[string]int64          // this cycle's acked ack-queue deliveries: token to DeliveredAt (unix ns)
	late       int                       // deliveries reported after a later delivery's ack, not fed to the oracle (lateDelivery)
	lateGaps   []time.Duration           // for each late one: how long before the acked delivery it began
	lateStalls []time.Duration           // for each late one: from its start to its report line
	starts     map[string]deliveryStarts // this cycle's ack-queue delivery starts by token (kill9overlap_test.go)
	overlaps   []string                  // deliveries begun inside an acked delivery's lease
	judged     int                       // deliveries judged against the lease of an earlier one that was acked (judge)
	closest    time.Duration             // the least start-to-start gap judged
}

// maxRun is how long after its start a child is killed at the latest.
var maxRun = time.Duration(scaled(1, 1)) * 350 * time.Millisecond

func (h *kill9Parent) cycle(n int) {
	t := h.t
	cfg := childConfig{Mode: "kill9", Dir: h.dirA, Sorted: h.dirB, Cycle: n, Seed: h.rng.Uint64(),
		Sync: pickSync(h.rng), Lifetime: time.Minute, Kill9: &h.opts}
	if h.rng.IntN(4) == 0 {
		cfg.DieAt = snapshotSteps[h.rng.IntN(len(snapshotSteps))]
	}
	h.syncs[cfg.Sync]++
	h.newCycle()
	run := time.Duration(h.rng.Int64N(int64(maxRun)))
	if raceEnabled {
		run *= 3
	}
	c := startChild(t, t.Name(), cfg)
	c.runFor(run, h.apply)
	if !c.killed() {
		t.Fatalf("cycle %d: the child was not killed but exited (%v); its output:\n%s", n, c.err, c.output())
	}
	if len(h.violations) > 0 {
		t.Fatalf("cycle %d: the child saw: %s\nits output:\n%s", n, strings.Join(h.violations, "; "), c.output())
	}
	if len(h.overlaps) > 0 {
		t.Fatalf("cycle %d: leases of one message overlapped: %s", n, strings.Join(h.overlaps, "; "))
	}
	if r := c.raceReport(); r != "" {
		t.Fatalf("cycle %d: the race detector found a data race in the child:\n%s", n, r)
	}
	what := fmt.Sprintf("cycle %d (sync %d, die at %q, killed after %v)", n, cfg.Sync, cfg.DieAt, run)
	checkLive(t, what+" ack queue", h.oa, h.hist)
	checkLive(t, what+" sorted queue", h.ob, h.hist)
	h.check(what+" ack queue", h.oa, h.dirA, h.drainQueue, true)
	h.check(what+" sorted queue", h.ob, h.dirB, h.drainSorted, true)
}

// newCycle empties what the parent keeps of one cycle's reports.
func (h *kill9Parent) newCycle() {
	h.hist, h.ackedAt, h.starts = make(map[string]string), make(map[string]int64), make(map[string]deliveryStarts)
}

// apply feeds one report line to the oracles.
func (h *kill9Parent) apply(l string) {
	if len(l) < 2 {
		return
	}
	code, arg := l[0], l[2:]
	var at int64
	var times deliveryTimes
	if code == 'd' {
		arg, times = splitDeliveryTimes(arg)
	}
	if strings.IndexByte("dEkKxR", code) >= 0 {
		arg, at = cutInt(arg, "@")
	}
	h.hist[arg] += string(code)
	switch code {
	case 'a':
		h.oa.EnqueueAttempt(arg)
	case 'e':
		h.oa.Enqueued(arg)
	case 'd':
		h.noteDelivery(arg, at)
		h.delivered(arg, at, times)
	case 'E':
		h.noteExtend(arg, at)
	case 'k':
		h.noteAckAttempt(arg, at)
		h.oa.AckAttempt(arg)
	case 'K':
		h.oa.Acked(arg)
		h.ackedAt[arg] = at
	case 'x':
		h.oa.AckFailed(arg)
	case 'R':
		h.oa.Released(arg)
	case 'p':
		h.ob.EnqueueAttempt(arg)
	case 'P':
		h.ob.Enqueued(arg)
	case 'l':
		h.ob.Delivered(arg)
	case 'b':
		h.ob.AckAttempt(arg)
	case 'B':
		h.ob.Acked(arg)
	case 'y':
		h.ob.AckFailed(arg)
	case 'M':
		h.ob.Released(arg)
	case 'r':
		a, b, _ := strings.Cut(arg, " ")
		na, _ := strconv.ParseInt(a, 10, 64)
		nb, _ := strconv.ParseInt(b, 10, 64)
		h.recA, h.recB = append(h.recA, time.Duration(na)), append(h.recB, time.Duration(nb))
	case 's':
		h.stepKills[arg]++
	case '!':
		h.violations = append(h.violations, arg)
	}
}

// checkLive fails the test when o counted a violation in a child's
// reports themselves (a delivery after an ack returned, of a message never
// enqueued): the drains fail at once on theirs, so the totals were clean
// before this cycle's reports. hist is the cycle's report codes by token
// (nil: none kept).
func checkLive(t *testing.T, what string, o *fuzz.Oracle, hist map[string]string) {
	t.Helper()
	if r := o.Result(); !r.OK() {
		tok, _, _ := strings.Cut(r.Examples[0], ":")
		t.Fatalf("%s: %s; this cycle's report codes of %s: %q", what, r, tok, hist[tok])
	}
}

// cutInt splits s at its first sep into the part before it and the
// integer after it (unix ns in the reports), 0 when s has no sep. An
// ack-queue delivery's argument is token@DeliveredAt; a dead-letter
// report's count is "<n> <at>".
func cutInt(s, sep string) (string, int64) {
	head, tail, ok := strings.Cut(s, sep)
	if !ok {
		return s, 0
	}
	n, _ := strconv.ParseInt(tail, 10, 64)
	return head, n
}

// deliveryTag names one delivery of m in the reports: its token and when
// the delivery began.
func deliveryTag(m *queue.Message) string {
	return tokenOf(m.Payload) + "@" + strconv.FormatInt(m.DeliveredAt.UnixNano(), 10)
}

// check drains a copy of dir (or dir itself when copy is false) and feeds
// the drain to the oracle.
func (h *kill9Parent) check(what string, o *fuzz.Oracle, dir string, drain func(string) (drained, error), copy bool) {
	t := h.t
	img := dir
	if copy {
		img = scratchDir(t)
		if err := copyDir(dir, img); err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(img)
		// A child killed before it opened this queue left no log: nothing to
		// verify (the drain opens it as a new queue).
		if _, err := os.Stat(filepath.Join(img, "log")); err == nil {
			if _, err := queue.Verify(img, nil); err != nil {
				t.Fatalf("%s: Verify: %v", what, err)
			}
		}
	}
	before := scratchDir(t) // the state before the drain, to explain a failure
	if err := copyDir(img, before); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(before)
	d, err := drain(img)
	if err != nil {
		t.Fatalf("%s: drain: %v", what, err)
	}
	if r := o.Recovered(d.tokens); !r.OK() {
		tok, _, _ := strings.Cut(r.Examples[0], ":")
		t.Logf("%s: this cycle's report codes: %q; log records:\n%s", tok, h.hist[tok], explainToken(before, tok))
		t.Fatalf("%s: %s", what, r)
	}
}

// finalDrain drains the directories themselves, then checks that they are
// empty.
func (h *kill9Parent) finalDrain() {
	h.check("final drain, ack queue", h.oa, h.dirA, h.drainQueue, false)
	h.check("final drain, sorted queue", h.ob, h.dirB, h.drainSorted, false)
}

// drainQueue drains dir as the package's drainQueue does, with the
// children's SegmentSize, as their application reopens with: the default,
// larger one would take states for torn rolls that it refuses.
func (h *kill9Parent) drainQueue(dir string) (drained, error) {
	return drainWith(dir, drainOptionsAs(h.opts.SegmentSize))
}

// drainSorted drains dir as the package's drainSorted does, with the
// children's SegmentSize.
func (h *kill9Parent) drainSorted(dir string) (drained, error) {
	return drainSortedWith(dir, drainOptionsAs(h.opts.SegmentSize))
}

func (h *kill9Parent) summary(cycles int, took time.Duration) {
	t := h.t
	ra, rb := h.oa.Result(), h.ob.Result()
	slices.Sort(h.recA)
	slices.Sort(h.recB)
	t.Logf("ack queue:    %s", ra)
	t.Logf("sorted queue: %s", rb)
	t.Logf("cycles by sync mode (0 always, 1 interval, 2 never): %v; killed at a snapshot step: %v", h.syncs, h.stepKills)
	t.Logf("recovery (Open) ack queue p50 %v p99 %v max %v; sorted p50 %v p99 %v (%d samples)",
		percentile(h.recA, 50), percentile(h.recA, 99), percentile(h.recA, 100),
		percentile(h.recB, 50), percentile(h.recB, 99), len(h.recA))
	slices.Sort(h.lateGaps)
	slices.Sort(h.lateStalls)
	t.Logf("ack-queue deliveries reported after the ack of a later delivery begun at least AckTimeout after them (a stalled consumer; not fed to the oracle): %d; "+
		"their start before the acked one's: min %v max %v; their start to their report: min %v max %v",
		h.late, percentile(h.lateGaps, 0), percentile(h.lateGaps, 100), percentile(h.lateStalls, 0), percentile(h.lateStalls, 100))
	t.Logf("ack-queue deliveries begun after one whose consumer tried to ack it (none may begin within AckTimeout %v of it): %d; closest %v",
		h.opts.AckTimeout, h.judged, h.closest)
	t.Logf("SUMMARY kill9: cycles=%d enqueued=%d acked=%d lost=%d unexpected=%d redelivered-after-ack=%d duplicates(allowed)=%d recovery-p50=%v recovery-p99=%v in %v",
		cycles, ra.Enqueued+rb.Enqueued, ra.Acked+rb.Acked, ra.Lost+rb.Lost, ra.Unexpected+rb.Unexpected,
		ra.RedeliveredAfterAck+rb.RedeliveredAfterAck, ra.Duplicates+rb.Duplicates,
		percentile(h.recA, 50), percentile(h.recA, 99), took.Round(time.Second))
}

// explainToken returns the log records of the message that carries tok
// in the queue directory dir (an ack queue's, or a sorted queue's).
func explainToken(dir, tok string) string {
	var b strings.Builder
	var seq uint64
	err := queue.ReadLog(dir, 0, func(r queue.Record) error {
		if (r.Op == "enqueue" || r.Op == "publish") && tokenOf(r.Payload) == tok {
			seq = r.Seq
			if r.Op == "publish" {
				seq = r.LSN
			}
		}
		if seq != 0 && (r.Seq == seq || r.LSN == seq) {
			fmt.Fprintf(&b, "  LSN %d %s seq %d lease %d at %d due %d\n", r.LSN, r.Op, r.Seq, r.Lease, r.At.UnixNano(), r.Due.UnixNano())
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(&b, "  ReadLog: %v\n", err)
	}
	if seq == 0 {
		b.WriteString("  (no enqueue record in the log kept)\n")
	}
	return b.String()
}

// pickSync chooses a sync mode: mostly SyncAlways. A kill -9 must lose
// nothing that returned in any mode.
func pickSync(rng *rand.Rand) int {
	switch r := rng.IntN(10); {
	case r < 7:
		return int(queue.SyncAlways)
	case r < 8:
		return int(queue.SyncInterval)
	default:
		return int(queue.SyncNever)
	}
}

// kill9Child is the child side: the workload.
type kill9Child struct {
	cfg         *childConfig
	rep         *reporter
	q           *queue.Queue
	s           *queue.Sorted[int64]
	outstanding atomic.Int64 // ack queue messages enqueued and not acked, roughly
	sortedOut   atomic.Int64 // sorted values published and not acked, roughly
	awaiting    chan awaited // asynchronous calls whose outcome await reports
}

// awaited is an asynchronous call of the child: when its Pending completes
// without error, await reports code for toks (e: enqueued, K: acked).
type awaited struct {
	p    *queue.Pending
	code byte
	toks []string
}

// runKill9Child opens both queues and runs the workload until it is
// killed.
func runKill9Child(cfg *childConfig) {
	c := &kill9Child{cfg: cfg, rep: newReporter()}
	go func() {
		time.Sleep(cfg.Lifetime)
		os.Exit(0) // the parent is gone
	}()
	ko := cfg.Kill9
	common := queue.Options{Sync: queue.SyncMode(cfg.Sync), SegmentSize: ko.SegmentSize, SnapshotBytes: ko.SnapshotBytes,
		AckTimeout: ko.AckTimeout, DedupWindow: ko.DedupWindow}
	testhook.SetSnapshotStep(&common, c.step)
	o := common
	o.MaxDeliveries = ko.MaxDeliveries
	var err error
	if c.q, err = queue.Open(cfg.Dir, &o); err != nil {
		c.rep.failf("open ack queue after a crash: %v", err)
		os.Exit(2)
	}
	so := &queue.SortedOptions{Options: common, SingleFlight: !ko.ManyFlights}
	so.MaxDeliveries = -1 // a sorted queue's dead values cannot be listed for the drain
	if c.s, err = queue.OpenSorted[int64](cfg.Sorted, so); err != nil {
		c.rep.failf("open sorted queue after a crash: %v", err)
		os.Exit(2)
	}
	c.rep.line('r', fmt.Sprintf("%d %d", c.q.Recovery().Duration, c.s.Recovery().Duration))
	st, sst := c.q.Stats(), c.s.Stats()
	c.outstanding.Store(st.Ready + st.Delayed + st.InFlight + st.Dead)
	c.sortedOut.Store(int64(sst.SortedPending + sst.SortedLeased + sst.SortedDead))
	c.awaiting = make(chan awaited, 1024)
	go c.await()
	for i := range 2 {
		go c.produce(i)
		go c.consume(i)
	}
	go c.publish()
	go c.pull()
	c.housekeep()
}

// rng returns a generator for one goroutine of the child.
func (c *kill9Child) rng(i int) *rand.Rand {
	return rand.New(rand.NewPCG(c.cfg.Seed, uint64(i)))
}

// step is the snapshot hook: at the configured step, the child kills
// itself.
func (c *kill9Child) step(name string) {
	if name != c.cfg.DieAt {
		return
	}
	c.rep.line('s', name)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

func (c *kill9Child) produce(i int) {
	rng, ctx := c.rng(10+i), context.Background()
	for n := 0; ; n++ {
		if c.outstanding.Load() > 300 {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		tok := fmt.Sprintf("A%d.%d.%d", c.cfg.Cycle, i, n)
		switch r := rng.IntN(100); {
		case r < 15:
			c.produceBatch(rng, tok, 2+rng.IntN(4))
			continue
		case r < 35:
			c.produceAsync(rng, tok, 1+rng.IntN(16))
			continue
		}
		var opts []queue.EnqueueOption
		switch r := rng.IntN(100); {
		case r < 12:
			opts = append(opts, queue.WithDelay(time.Duration(1+rng.IntN(150))*time.Millisecond))
		case r < 20:
			opts = append(opts, queue.WithID(tok))
		}
		c.rep.line('a', tok)
		if _, err := c.q.Enqueue(ctx, payload(tok, rng.IntN(400)), opts...); err != nil {
			c.rep.failf("enqueue %s: %v", tok, err)
			continue
		}
		c.rep.line('e', tok)
		c.outstanding.Add(1)
	}
}

func (c *kill9Child) produceBatch(rng *rand.Rand, prefix string, n int) {
	toks := make([]string, n)
	items := make([]queue.Item, n)
	for j := range items {
		toks[j] = fmt.Sprintf("%s.b%d", prefix, j)
		items[j] = queue.Item{Payload: payload(toks[j], rng.IntN(200))}
	}
	c.rep.line('a', toks...)
	if _, err := c.q.EnqueueBatch(context.Background(), items); err != nil {
		c.rep.failf("enqueue batch %s: %v", prefix, err)
		return
	}
	c.rep.line('e', toks...)
	c.outstanding.Add(int64(n))
}

// produceAsync streams n enqueues with EnqueueAsync; await reports each
// one as enqueued once its Pending completed without error.
func (c *kill9Child) produceAsync(rng *rand.Rand, prefix string, n int) {
	ctx := context.Background()
	for j := range n {
		tok := fmt.Sprintf("%s.s%d", prefix, j)
		var opts []queue.EnqueueOption
		switch r := rng.IntN(100); {
		case r < 10:
			opts = append(opts, queue.WithDelay(time.Duration(1+rng.IntN(150))*time.Millisecond))
		case r < 20:
			opts = append(opts, queue.WithID(tok))
		}
		c.rep.line('a', tok)
		p, err := c.q.EnqueueAsync(ctx, payload(tok, rng.IntN(400)), opts...)
		if err != nil {
			c.rep.failf("async enqueue %s: %v", tok, err)
			return
		}
		c.awaiting <- awaited{p: p, code: 'e', toks: []string{tok}}
	}
}

// await reports the asynchronous calls' outcomes, in the order they were
// made; a Pending that fails is a violation (nothing fails the disk here).
func (c *kill9Child) await() {
	for a := range c.awaiting {
		<-a.p.Done()
		if err := a.p.Err(); err != nil {
			c.rep.failf("pending %c %v: %v", a.code, a.toks, err)
			continue
		}
		c.rep.line(a.code, a.toks...)
		switch a.code {
		case 'e':
			c.outstanding.Add(int64(len(a.toks)))
		case 'K':
			c.outstanding.Add(-int64(len(a.toks)))
		}
	}
}

func (c *kill9Child) consume(i int) {
	rng := c.rng(20 + i)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		ms, err := c.q.DequeueBatch(ctx, 1+rng.IntN(6))
		cancel()
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				c.rep.failf("dequeue: %v", err)
			}
			continue
		}
		ret := time.Now()
		toks := make([]string, len(ms))
		for j, m := range ms {
			toks[j] = deliveryTag(m)
		}
		c.rep.line('d', withDeliveryTimes(toks, ret)...)
		switch r := rng.IntN(100); {
		case r < 20:
			c.settleBatch(rng, ms, toks)
		case r < 35:
			c.ackAsync(rng, ms, toks)
		default:
			for j, m := range ms {
				c.handle(rng, m, toks[j])
			}
		}
	}
}

// handle acks, nacks, extends, dead-letters or forgets a delivery (tok
// is its deliveryTag).
func (c *kill9Child) handle(rng *rand.Rand, m *queue.Message, tok string) {
	switch r := rng.IntN(100); {
	case r < 72:
		c.ack(m, tok)
	case r < 80:
		c.release(m.Nack(time.Duration(rng.IntN(3)*rng.IntN(60))*time.Millisecond), "nack", tok)
	case r < 85:
		c.rep.line('E', tok)
		if err := m.Extend(300 * time.Millisecond); err != nil && !errors.Is(err, queue.ErrLeaseLost) {
			c.rep.failf("extend %s: %v", tok, err)
		}
		c.ack(m, tok)
	case r < 88:
		c.release(m.DeadLetter("kill9 test"), "dead-letter", tok)
	default:
		// Forget it: the lease runs out and the message comes back.
	}
}

// settleBatch settles a dequeued batch in one Settle: each message is
// acked, nacked, extended, dead-lettered or left to run out, and each
// outcome is read from the *BatchError.
func (c *kill9Child) settleBatch(rng *rand.Rand, ms queue.Messages, toks []string) {
	var ss []queue.Settlement
	var sToks []string
	for j, m := range ms {
		s := queue.Settlement{Receipt: m.Receipt}
		switch r := rng.IntN(100); {
		case r < 70:
			s.Op = queue.SettleAck
			c.rep.line('k', toks[j])
		case r < 80:
			s.Op, s.Delay = queue.SettleNack, time.Duration(rng.IntN(3)*rng.IntN(60))*time.Millisecond
		case r < 85:
			s.Op, s.Delay = queue.SettleExtend, 300*time.Millisecond
		case r < 90:
			s.Op, s.Reason = queue.SettleDeadLetter, "kill9 test batch"
		default:
			continue // forget it
		}
		ss, sToks = append(ss, s), append(sToks, toks[j])
	}
	errs := make([]error, len(ss))
	var be *queue.BatchError
	switch err := c.q.Settle(ss...); {
	case errors.As(err, &be):
		errs = be.Errs
	case err != nil:
		c.rep.failf("settle %v: %v", sToks, err)
		return
	}
	for j, s := range ss {
		c.settled(s.Op, sToks[j], errs[j])
	}
}

// settled reports the outcome of one settlement of a batch.
func (c *kill9Child) settled(op queue.SettleOp, tok string, err error) {
	switch {
	case err != nil && !errors.Is(err, queue.ErrLeaseLost):
		c.rep.failf("settle %s: %v", tok, err)
	case op == queue.SettleAck && err == nil:
		c.rep.line('K', tok)
		c.outstanding.Add(-1)
	case op == queue.SettleAck:
		c.rep.line('x', tok)
	case (op == queue.SettleNack || op == queue.SettleDeadLetter) && err == nil:
		c.rep.line('R', tok)
	}
}

// ackAsync acks a dequeued batch without waiting: in one SettleAsync, or
// one AckAsync per message. await reports the acks once their Pending
// completed; a refused ack is reported at once.
func (c *kill9Child) ackAsync(rng *rand.Rand, ms queue.Messages, toks []string) {
	c.rep.line('k', toks...)
	if rng.IntN(2) == 0 {
		for j, m := range ms {
			p, err := m.AckAsync()
			c.asyncAcked(p, err, toks[j:j+1])
		}
		return
	}
	p, err := ms.AckAsync()
	c.asyncAcked(p, err, toks)
}

// asyncAcked hands the acks of toks that p covers to await; err names the
// refused ones.
func (c *kill9Child) asyncAcked(p *queue.Pending, err error, toks []string) {
	var be *queue.BatchError
	var refused []error
	switch {
	case errors.As(err, &be):
		refused = be.Errs
	case errors.Is(err, queue.ErrLeaseLost):
		refused = []error{err}
	case err != nil:
		c.rep.failf("async ack %v: %v", toks, err)
		return
	}
	var applied []string
	for j, tok := range toks {
		if refused != nil && refused[j] != nil {
			c.settled(queue.SettleAck, tok, refused[j])
			continue
		}
		applied = append(applied, tok)
	}
	if p != nil {
		c.awaiting <- awaited{p: p, code: 'K', toks: applied}
	}
}

func (c *kill9Child) ack(m *queue.Message, tok string) {
	c.rep.line('k', tok)
	switch err := m.Ack(); {
	case err == nil:
		c.rep.line('K', tok)
		c.outstanding.Add(-1)
	case errors.Is(err, queue.ErrLeaseLost):
		c.rep.line('x', tok)
	default:
		c.rep.failf("ack %s: %v", tok, err)
	}
}

func (c *kill9Child) release(err error, what, tok string) {
	switch {
	case err == nil:
		c.rep.line('R', tok)
	case !errors.Is(err, queue.ErrLeaseLost):
		c.rep.failf("%s %s: %v", what, tok, err)
	}
}

func (c *kill9Child) publish() {
	rng, ctx := c.rng(30), context.Background()
	for n := 0; ; n++ {
		if c.sortedOut.Load() > 300 {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		tok := fmt.Sprintf("S%d.%d", c.cfg.Cycle, n)
		c.rep.line('p', tok)
		if err := c.s.Publish(ctx, rng.Int64N(1000), fmt.Sprintf("k%d", rng.IntN(8)), payload(tok, rng.IntN(200))); err != nil {
			c.rep.failf("publish %s: %v", tok, err)
			continue
		}
		c.rep.line('P', tok)
		c.sortedOut.Add(1)
	}
}

func (c *kill9Child) pull() {
	rng := c.rng(31)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		bs, err := c.s.Pull(ctx, 1+rng.IntN(20))
		cancel()
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				c.rep.failf("pull: %v", err)
			}
			continue
		}
		for _, b := range bs {
			c.settle(rng, b)
		}
	}
}

// settle acks or nacks a pulled batch.
func (c *kill9Child) settle(rng *rand.Rand, b *queue.Batch[int64]) {
	toks := make([]string, len(b.Values))
	for j, v := range b.Values {
		toks[j] = tokenOf(v.Payload)
	}
	c.rep.line('l', toks...)
	if rng.IntN(100) < 15 {
		switch err := b.Nack(time.Duration(rng.IntN(50)) * time.Millisecond); {
		case err == nil:
			c.rep.line('M', toks...)
		case !errors.Is(err, queue.ErrLeaseLost):
			c.rep.failf("batch nack: %v", err)
		}
		return
	}
	c.rep.line('b', toks...)
	switch err := b.Ack(); {
	case err == nil:
		c.rep.line('B', toks...)
		c.sortedOut.Add(-int64(len(toks)))
	case errors.Is(err, queue.ErrLeaseLost):
		c.rep.line('y', toks...)
	default:
		c.rep.failf("batch ack: %v", err)
	}
}

// housekeep compacts both queues now and then, and requeues dead letters.
func (c *kill9Child) housekeep() {
	rng := c.rng(40)
	for {
		time.Sleep(time.Duration(20+rng.IntN(100)) * time.Millisecond)
		if err := c.q.Compact(); err != nil {
			c.rep.failf("compact ack queue: %v", err)
		}
		if err := c.s.Compact(); err != nil {
			c.rep.failf("compact sorted queue: %v", err)
		}
		if rng.IntN(4) == 0 {
			if _, err := c.q.RequeueAllDead(); err != nil {
				c.rep.failf("requeue dead: %v", err)
			}
		}
	}
}
