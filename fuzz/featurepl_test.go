package fuzz_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/queue"
)

// TestFeaturesPowerLoss drives what TestPowerLoss drives little: producer
// ids (WithID, retries, reopens with another DedupWindow), delayed
// enqueues and delayed nacks on a clock that moves, Extend, dead letters
// (DeadLetter, RequeueDead, PurgeDead, RequeueAllDead, PurgeAllDead),
// asynchronous enqueues and settles, clean reopens, and compaction over
// 4 KiB segments, under SyncAlways on a crash file system. It crashes the
// run at every durable operation and checks several power-loss states of
// each against a model of every message:
//
//   - while the run goes on, each delivery is of a message the model holds
//     ready or due (never leased by another, delayed, dead or gone), with
//     its own payload; a settle of a lease that ran out fails with
//     ErrLeaseLost and no other does; a retry of a live id, or of one acked
//     or purged within the open's window, fails with ErrDuplicate, and a
//     retry of one whose ack or purge the open forgot (no window, or the
//     window passed) succeeds;
//   - after the crash, opened at the crash's time: each message is ready
//     (a lease the crash ended, a delay or nack delay passed), later (a
//     delay not passed, a lease a clean Close kept), dead, or gone, as the
//     model says after the last call that returned, or before a call whose
//     outcome the crash left open; every id the model says is still
//     refused (live, or acked within the recovered open's window and not
//     forgotten by an open since) fails with ErrDuplicate.
//
// Long run: WALQ_FEATURES_STATES=100000 WALQ_FEATURES_RUNS=10 go test ./fuzz -run '^TestFeaturesPowerLoss$' -timeout 1h -v
func TestFeaturesPowerLoss(t *testing.T) {
	states := envInt(t, "WALQ_FEATURES_STATES", scaled(3000, 12))
	runs := envInt(t, "WALQ_FEATURES_RUNS", scaled(2, 2))
	_, seed := testRand(t)
	var total fpSummary
	for r := range runs {
		s, err := featuresPowerLoss(t, seed+uint64(r), states/runs)
		total = total.add(s)
		if err != nil {
			t.Fatalf("workload seed %d: %v\n(replay: WALQ_SEED=%d WALQ_FEATURES_RUNS=%d)", seed+uint64(r), err, seed, runs)
		}
	}
	t.Logf("SUMMARY features-powerloss: %s", total)
}

// fpSummary counts what the runs checked.
type fpSummary struct {
	runs, points, states, refused int
	dedupProbes, delivered        int    // ids probed after recovery; deliveries checked while running
	retries                       [2]int // retries of a producer id while running: refused, accepted
	classes                       map[string]int
}

func (s fpSummary) add(o fpSummary) fpSummary {
	s.runs, s.points, s.states, s.refused = s.runs+o.runs, s.points+o.points, s.states+o.states, s.refused+o.refused
	s.dedupProbes, s.delivered = s.dedupProbes+o.dedupProbes, s.delivered+o.delivered
	s.retries[0], s.retries[1] = s.retries[0]+o.retries[0], s.retries[1]+o.retries[1]
	if s.classes == nil {
		s.classes = make(map[string]int)
	}
	for k, v := range o.classes {
		s.classes[k] += v
	}
	return s
}

func (s fpSummary) String() string {
	return fmt.Sprintf("runs=%d crash-points=%d states=%d refused(hole-or-reordered)=%d dedup-probes=%d deliveries-checked=%d retries(refused,accepted)=%v observed=%v",
		s.runs, s.points, s.states, s.refused, s.dedupProbes, s.delivered, s.retries, s.classes)
}

// featuresPowerLoss runs one workload without a crash, then crashed at
// each durable operation on as many workers as there are CPUs.
func featuresPowerLoss(t *testing.T, seed uint64, states int) (fpSummary, error) {
	base := scratchDir(t)
	dry, err := fpRun(filepath.Join(base, "dry"), seed, 0)
	if err != nil {
		return fpSummary{}, err
	}
	if len(dry.w.violations) > 0 {
		return fpSummary{}, fmt.Errorf("without a crash: %s", strings.Join(dry.w.violations, "; "))
	}
	npoints := dry.durable + 1
	s := fpSummary{runs: 1, points: npoints, delivered: dry.w.delivered, retries: dry.w.retries}
	perPoint := max(1, (states+npoints-1)/npoints)
	return checkCrashPoints(base, npoints, 0, s, func(scratch string, n int) (fpSummary, error) {
		return fpCheckPoint(scratch, seed, n, perPoint)
	})
}

// fpCheckPoint runs the workload crashing at durable operation n and
// checks perPoint states built from the crash.
func fpCheckPoint(scratch string, seed uint64, n, perPoint int) (fpSummary, error) {
	s := fpSummary{classes: make(map[string]int)}
	root := filepath.Join(scratch, fmt.Sprint("run-", n))
	defer os.RemoveAll(root)
	run, err := fpRun(root, seed, n)
	if err != nil {
		return s, err
	}
	if len(run.w.violations) > 0 {
		return s, fmt.Errorf("crash at durable operation %d, while running: %s", n, strings.Join(run.w.violations, "; "))
	}
	for v := range perPoint {
		dst := filepath.Join(scratch, fmt.Sprint("state-", n, "-", v))
		rng := rand.New(rand.NewPCG(seed, uint64(n)<<20|uint64(v)))
		st, err := run.fsys.Materialize(dst, rng)
		if err != nil {
			return s, err
		}
		window := []time.Duration{0, 3 * time.Second, fpWindow, 60 * time.Second}[rng.IntN(4)]
		excused := st.MayRefuse(dst) || reordered(st)
		probes, err := run.w.observe(filepath.Join(dst, "q"), window, run.end(), s.classes)
		os.RemoveAll(dst)
		s.states++
		s.dedupProbes += probes
		if errors.Is(err, queue.ErrCorrupt) && excused {
			s.refused++
			continue
		}
		if err != nil {
			if os.Getenv("WALQ_FEATURES_TRACE") != "" {
				fmt.Println(strings.Join(run.w.trace, "\n"))
			}
			return s, fmt.Errorf("crash at durable operation %d (during %s), state %d (%s), recovered with DedupWindow %v: %w",
				n, run.crashed, v, st.Desc, window, err)
		}
	}
	return s, nil
}

// fpOps is the workload's length; fpWindow the DedupWindow it opens with.
const (
	fpOps     = 120
	fpWindow  = 20 * time.Second
	fpTimeout = 5 * time.Second // AckTimeout
)

// fpCrashRun is one run of the workload on a crash file system.
type fpCrashRun struct {
	fsys    *crashfs.FS
	w       *fpWorkload
	durable int    // durable operations made
	crashed string // the call the crash came during; "" when none did
}

// fpRun runs the workload in root, crashing at durable operation crashAt
// (0: never), and takes the image.
func fpRun(root string, seed uint64, crashAt int) (*fpCrashRun, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	fsys, err := crashfs.New(root, crashAt)
	if err != nil {
		return nil, err
	}
	w := newFPWorkload(filepath.Join(root, "q"), fsys, seed)
	run := &fpCrashRun{fsys: fsys, w: w}
	run.crashed = w.run()
	if run.crashed != "" && !fsys.Crashed() {
		return nil, fmt.Errorf("%s failed without a crash: %s", run.crashed, w.err)
	}
	if err := fsys.Image(); err != nil {
		return nil, err
	}
	run.durable, _ = fsys.Ops()
	return run, nil
}

// fpKind is what the model says of a message.
type fpKind uint8

const (
	fpAbsent  fpKind = iota // never enqueued (an enqueue the crash may have taken)
	fpReady                 // deliverable now
	fpDelayed               // deliverable from at (a delay or a nack's delay)
	fpLeased                // leased until at
	fpDead                  // in the dead-letter set
	fpGone                  // acked or purged
)

// fpState is a message's state in the model.
type fpState struct {
	kind fpKind
	at   time.Time // fpDelayed: due; fpLeased: the lease's deadline
}

// fpMsg is the model of one message.
type fpMsg struct {
	tok     string
	pid     string    // producer-given id; "" for none
	id      string    // the message id, once known
	pad     int       // payload(tok, pad) is its payload
	cur     fpState   // after every call made so far
	alts    []fpState // what it may be instead, when calls since the last durable point did not survive
	ackedAt time.Time // when it was acked or purged (zero: never)
	forgot  bool      // an open forgot its id (window 0 or passed) since its ack
}

// fpHeld is a delivery the workload holds.
type fpHeld struct {
	m   *queue.Message
	msg *fpMsg
}

// fpWorkload drives one queue from one goroutine and keeps the model.
type fpWorkload struct {
	dir        string
	fsys       *crashfs.FS
	clock      *fakeclock.Clock
	rng        *rand.Rand
	q          *queue.Queue
	window     time.Duration     // the open's DedupWindow
	msgs       map[string]*fpMsg // by token
	byPID      map[string]*fpMsg // the newest message of each producer id
	pids       []string          // every producer id used, in order
	held       []fpHeld
	touched    []*fpMsg // messages with alts
	n          int      // tokens made
	delivered  int      // deliveries checked
	retries    [2]int   // retries of a producer id refused, accepted
	err        error    // the error of the call the crash came during
	trace      []string // the calls made, for a failure message
	closeLast  bool     // a clean Close may be the last durable record: the open after a crash keeps the leases
	violations []string // what the running queue did wrong
}

func newFPWorkload(dir string, fsys *crashfs.FS, seed uint64) *fpWorkload {
	return &fpWorkload{dir: dir, fsys: fsys, clock: newManualClock(), rng: rand.New(rand.NewPCG(seed, 29)),
		window: fpWindow, msgs: make(map[string]*fpMsg), byPID: make(map[string]*fpMsg)}
}

func (w *fpWorkload) options() *queue.Options {
	return &queue.Options{Sync: queue.SyncAlways, SegmentSize: 4096, SnapshotBytes: 6000, ManualRequeue: true,
		MaxDeliveries: -1, AckTimeout: fpTimeout, DedupWindow: w.window, Clock: w.clock, FS: w.fsys}
}

func (w *fpWorkload) violation(format string, args ...any) {
	if len(w.violations) < 8 {
		w.violations = append(w.violations, fmt.Sprintf(format, args...))
	}
}

// run runs the workload until it ends or a call fails (the crash), closes
// the queue, and returns the call the crash came during ("" when none did).
func (w *fpWorkload) run() string {
	q, err := queue.Open(w.dir, w.options())
	if err != nil {
		w.err = err
		return "Open"
	}
	w.q = q
	for range fpOps {
		what, err := w.step()
		w.trace = append(w.trace, fmt.Sprintf("%v %s %v", w.clock.Now().Format("05"), what, err))
		if err != nil {
			w.err = err
			if w.q != nil {
				w.q.Close()
			}
			return what
		}
	}
	if err := w.q.Close(); err != nil {
		w.err = err
		return "Close"
	}
	w.durable()
	return ""
}

// set moves m to s after a call that returned.
func (w *fpWorkload) set(m *fpMsg, s fpState) {
	w.trace = append(w.trace, fmt.Sprintf("  %s %v->%v", m.tok, m.cur, s))
	m.cur = s
}

// maybe moves m to s after a call whose outcome is open until a later
// durable point (an asynchronous call, or the call the crash failed).
func (w *fpWorkload) maybe(m *fpMsg, s fpState) {
	if len(m.alts) == 0 {
		w.touched = append(w.touched, m)
	}
	m.alts = append(m.alts, m.cur)
	w.trace = append(w.trace, fmt.Sprintf("  %s maybe %v->%v", m.tok, m.cur, s))
	m.cur = s
}

// durable records that a call that waits for its fsync returned: every
// record written before it is durable (the log is written in order).
func (w *fpWorkload) durable() {
	for _, m := range w.touched {
		m.alts = nil
	}
	w.touched = nil
}

// apply records a synchronous call's effect on ms: certain when it
// returned nil (and, when it wrote a record, everything before it
// durable), open when it failed (the crash).
func (w *fpWorkload) apply(err error, ms []*fpMsg, ss []fpState) error {
	for i, m := range ms {
		if err != nil {
			w.maybe(m, ss[i])
		} else {
			w.set(m, ss[i])
		}
	}
	if err == nil && len(ms) > 0 { // a call that wrote nothing waited for nothing
		w.durable()
		w.closeLast = false
	}
	return err
}

// step makes one random call; it returns the call's name and the error of
// a call that failed (the crash).
func (w *fpWorkload) step() (string, error) {
	switch r := w.rng.IntN(100); {
	case r < 14:
		return "enqueue", w.enqueue()
	case r < 19:
		return "retry", w.retry()
	case r < 24:
		return "enqueue-batch", w.enqueueBatch()
	case r < 29:
		return "enqueue-async", w.enqueueAsync()
	case r < 52:
		return "dequeue", w.dequeue()
	case r < 70:
		return w.settle()
	case r < 78:
		return w.dead()
	case r < 81:
		return "compact", w.q.Compact()
	case r < 90:
		w.advance(time.Duration(1+w.rng.IntN(4)) * time.Second)
		return "advance", nil
	case r < 94:
		return "requeue-expired", w.requeueExpired()
	default:
		return w.reopen()
	}
}

// newMsg makes the model of a message about to be enqueued.
func (w *fpWorkload) newMsg(withPID bool) (*fpMsg, []queue.EnqueueOption, fpState) {
	w.n++
	m := &fpMsg{tok: fmt.Sprintf("F%d", w.n), pad: 50 + w.rng.IntN(300)}
	var opts []queue.EnqueueOption
	if withPID {
		m.pid = fmt.Sprintf("pid-%d", w.n)
		opts = append(opts, queue.WithID(m.pid))
	}
	next := fpState{kind: fpReady}
	if w.rng.IntN(4) == 0 {
		d := time.Duration(1+w.rng.IntN(8)) * time.Second
		opts = append(opts, queue.WithDelay(d))
		next = fpState{kind: fpDelayed, at: w.clock.Now().Add(d)}
	}
	w.msgs[m.tok] = m
	return m, opts, next
}

// added records the enqueue of m whose id is id ("" when not known).
func (w *fpWorkload) added(m *fpMsg, id string) {
	if m.pid != "" {
		if w.byPID[m.pid] == nil {
			w.pids = append(w.pids, m.pid)
		}
		w.byPID[m.pid] = m
		id = m.pid
	}
	m.id = id
}

func (w *fpWorkload) enqueue() error {
	m, opts, next := w.newMsg(w.rng.IntN(2) == 0)
	id, err := w.q.Enqueue(context.Background(), payload(m.tok, m.pad), opts...)
	w.added(m, id)
	return w.apply(err, []*fpMsg{m}, []fpState{next})
}

// retry enqueues a new message under a producer id used before: it must be
// refused while the id's message is live or was acked within the window.
func (w *fpWorkload) retry() error {
	if len(w.pids) == 0 {
		return w.enqueue()
	}
	pid := w.pids[w.rng.IntN(len(w.pids))]
	old := w.byPID[pid]
	refuse, accept := w.mustRefuse(old, w.clock.Now(), w.window), w.mustAccept(old, w.clock.Now())
	w.n++
	m := &fpMsg{tok: fmt.Sprintf("F%d", w.n), pid: pid, pad: 50 + w.rng.IntN(300)}
	_, err := w.q.Enqueue(context.Background(), payload(m.tok, m.pad), queue.WithID(pid))
	switch {
	case errors.Is(err, queue.ErrDuplicate) && accept:
		w.violation("retry of %s refused while its message %s was acked at %v (now %v, window %v, forgotten %v)",
			pid, old.tok, old.ackedAt, w.clock.Now(), w.window, old.forgot)
		return nil
	case errors.Is(err, queue.ErrDuplicate):
		w.retries[0]++
		return nil
	case err == nil && refuse:
		w.violation("retry of %s accepted while its message %s is %v (acked at %v, now %v, window %v)",
			pid, old.tok, old.cur.kind, old.ackedAt, w.clock.Now(), w.window)
	}
	if err == nil {
		w.retries[1]++
	}
	w.msgs[m.tok] = m
	w.added(m, pid)
	return w.apply(err, []*fpMsg{m}, []fpState{{kind: fpReady}})
}

// mustRefuse reports whether an enqueue with m's producer id must fail
// with ErrDuplicate at now under window: m is live whatever the calls
// whose outcome is open did, or was acked (or purged) within the window
// (at most window ago) and no open forgot it since.
func (w *fpWorkload) mustRefuse(m *fpMsg, now time.Time, window time.Duration) bool {
	for _, s := range append([]fpState{m.cur}, m.alts...) {
		if s.kind == fpAbsent {
			return false
		}
	}
	if m.cur.kind != fpGone {
		return true
	}
	return !m.forgot && window > 0 && now.Sub(m.ackedAt) <= window
}

// mustAccept reports whether an enqueue with m's producer id must succeed
// at now in the running queue: m's ack or purge is certain, and the open
// forgot the id (no window) or the window has passed.
func (w *fpWorkload) mustAccept(m *fpMsg, now time.Time) bool {
	if m.cur.kind != fpGone || len(m.alts) > 0 {
		return false
	}
	return m.forgot || w.window == 0 || now.Sub(m.ackedAt) > w.window
}

func (w *fpWorkload) enqueueBatch() error {
	var items []queue.Item
	var ms []*fpMsg
	var ss []fpState
	for range 2 + w.rng.IntN(2) {
		m, opts, next := w.newMsg(w.rng.IntN(2) == 0)
		it := queue.Item{Payload: payload(m.tok, m.pad)}
		for _, o := range opts {
			o(&it)
		}
		items = append(items, it)
		ms, ss = append(ms, m), append(ss, next)
	}
	ids, err := w.q.EnqueueBatch(context.Background(), items)
	for i, m := range ms {
		id := ""
		if i < len(ids) {
			id = ids[i]
		}
		w.added(m, id)
	}
	return w.apply(err, ms, ss)
}

func (w *fpWorkload) enqueueAsync() error {
	m, opts, next := w.newMsg(w.rng.IntN(2) == 0)
	p, err := w.q.EnqueueAsync(context.Background(), payload(m.tok, m.pad), opts...)
	id := ""
	if p != nil {
		id = p.ID()
	}
	w.added(m, id)
	w.maybe(m, next)
	return err
}

// dequeue takes one message and checks it against the model.
func (w *fpWorkload) dequeue() error {
	now := w.clock.Now()
	qm, err := w.q.TryDequeue()
	if errors.Is(err, queue.ErrEmpty) {
		w.checkEmpty(now)
		return nil
	}
	if err != nil {
		return err
	}
	w.delivered++
	m := w.msgs[tokenOf(qm.Payload)]
	switch {
	case m == nil:
		w.violation("delivered %q, never enqueued", tokenOf(qm.Payload))
		return nil
	case !bytes.Equal(qm.Payload, payload(m.tok, m.pad)):
		w.violation("%s delivered with another payload", m.tok)
	case m.pid != "" && qm.ID != m.pid:
		w.violation("%s delivered with id %q, enqueued with %q", m.tok, qm.ID, m.pid)
	case !fpDeliverable(m.cur, now):
		w.violation("%s delivered at %v while %v until %v", m.tok, now, m.cur.kind, m.cur.at)
	}
	m.id = qm.ID
	w.set(m, fpState{kind: fpLeased, at: now.Add(fpTimeout)})
	w.held = append(w.held, fpHeld{m: qm, msg: m})
	return nil
}

// fpDeliverable reports whether a delivery at now may take a message in s.
func fpDeliverable(s fpState, now time.Time) bool {
	switch s.kind {
	case fpReady:
		return true
	case fpDelayed, fpLeased:
		return !s.at.After(now)
	}
	return false
}

// checkEmpty reports a message ready for sure that TryDequeue did not find.
func (w *fpWorkload) checkEmpty(now time.Time) {
	for _, m := range w.msgs {
		if len(m.alts) == 0 && (m.cur.kind == fpReady || m.cur.kind == fpDelayed && !m.cur.at.After(now)) {
			w.violation("TryDequeue found nothing at %v while %s is %v (due %v)", now, m.tok, m.cur.kind, m.cur.at)
			return
		}
	}
}

// takeHeld removes up to n deliveries from the held ones, at random.
func (w *fpWorkload) takeHeld(n int) []fpHeld {
	var out []fpHeld
	for range n {
		if len(w.held) == 0 {
			break
		}
		i := w.rng.IntN(len(w.held))
		out = append(out, w.held[i])
		w.held = append(w.held[:i], w.held[i+1:]...)
	}
	return out
}

// settle acks, nacks, extends or dead-letters held deliveries, in one
// call, a batch or asynchronously.
func (w *fpWorkload) settle() (string, error) {
	hs := w.takeHeld(1 + w.rng.IntN(2))
	if len(hs) == 0 {
		return "nothing held", nil
	}
	now := w.clock.Now()
	var ss []queue.Settlement
	var next []fpState
	for _, h := range hs {
		s := queue.Settlement{Receipt: h.m.Receipt}
		switch r := w.rng.IntN(10); {
		case r < 5:
			s.Op = queue.SettleAck
			next = append(next, fpState{kind: fpGone})
		case r < 7:
			s.Op, s.Delay = queue.SettleNack, time.Duration(w.rng.IntN(3))*3*time.Second
			next = append(next, fpState{kind: fpDelayed, at: now.Add(s.Delay)})
		case r < 9:
			s.Op, s.Delay = queue.SettleExtend, time.Duration(2+w.rng.IntN(15))*time.Second
			next = append(next, fpState{kind: fpLeased, at: now.Add(s.Delay)})
		default:
			s.Op, s.Reason = queue.SettleDeadLetter, "features test"
			next = append(next, fpState{kind: fpDead})
		}
		ss = append(ss, s)
	}
	if w.rng.IntN(3) == 0 {
		return "settle-async", w.settleAsync(hs, ss, next, now)
	}
	err := w.q.Settle(ss...)
	return "settle", w.settled(hs, ss, next, now, err, false)
}

// settleAsync settles without waiting: the refusals are known at once,
// the rest becomes durable with a later call that waits for its fsync.
func (w *fpWorkload) settleAsync(hs []fpHeld, ss []queue.Settlement, next []fpState, now time.Time) error {
	_, err := w.q.SettleAsync(ss...)
	return w.settled(hs, ss, next, now, err, true)
}

// settled checks a settle's refusals against the leases' deadlines and
// records its effect; it returns the error of a failed call (the crash).
func (w *fpWorkload) settled(hs []fpHeld, ss []queue.Settlement, next []fpState, now time.Time, err error, async bool) error {
	errs := make([]error, len(hs))
	var be *queue.BatchError
	switch {
	case errors.As(err, &be):
		copy(errs, be.Errs)
		err = nil
	case errors.Is(err, queue.ErrLeaseLost) && len(hs) == 1:
		errs[0], err = err, nil
	}
	for i, h := range hs {
		lost := !h.msg.cur.at.After(now) || h.msg.cur.kind != fpLeased
		if e := errs[i]; e != nil && !(errors.Is(e, queue.ErrLeaseLost) && lost) {
			w.violation("%s settle %v refused: %v (lease until %v, now %v)", h.msg.tok, ss[i].Op, e, h.msg.cur.at, now)
		}
		if errs[i] == nil && err == nil && lost {
			w.violation("%s settle %v accepted at %v, its lease ran out at %v", h.msg.tok, ss[i].Op, now, h.msg.cur.at)
		}
		if errs[i] != nil {
			continue
		}
		if err != nil || async {
			w.maybe(h.msg, next[i])
		} else {
			w.set(h.msg, next[i])
		}
		w.after(h, ss[i], now)
	}
	if err == nil && !async && slices.Contains(errs, nil) {
		w.durable()
		w.closeLast = false
	}
	return err
}

// after records what a settle leaves: the ack time of an id, a delivery
// still held after an extend.
func (w *fpWorkload) after(h fpHeld, s queue.Settlement, now time.Time) {
	switch s.Op {
	case queue.SettleAck:
		w.gone(h.msg, now)
	case queue.SettleExtend:
		w.held = append(w.held, h)
	}
}

// gone records that m was acked or purged at now.
func (w *fpWorkload) gone(m *fpMsg, now time.Time) {
	m.ackedAt, m.forgot = now, w.window == 0
}

// dead makes one call on the dead-letter set.
func (w *fpWorkload) dead() (string, error) {
	// A message whose dead-lettering is not durable yet (an asynchronous
	// settle: alts) is dead in the running queue all the same, and
	// RequeueAllDead and PurgeAllDead take it.
	var dead []*fpMsg
	for _, tok := range fpTokens(w.msgs) {
		if m := w.msgs[tok]; m.cur.kind == fpDead {
			dead = append(dead, m)
		}
	}
	now := w.clock.Now()
	switch r := w.rng.IntN(10); {
	case len(dead) == 0:
		return "nothing dead", nil
	case r < 4:
		m := dead[w.rng.IntN(len(dead))]
		return "requeue-dead", w.apply(w.q.RequeueDead(m.id), []*fpMsg{m}, []fpState{{kind: fpReady}})
	case r < 8:
		m := dead[w.rng.IntN(len(dead))]
		err := w.q.PurgeDead(m.id)
		w.gone(m, now)
		return "purge-dead", w.apply(err, []*fpMsg{m}, []fpState{{kind: fpGone}})
	case r < 9:
		n, err := w.q.RequeueAllDead()
		if err == nil && n != len(dead) {
			w.violation("RequeueAllDead requeued %d of %d", n, len(dead))
		}
		return "requeue-all-dead", w.apply(err, dead, fill(len(dead), fpState{kind: fpReady}))
	default:
		n, err := w.q.PurgeAllDead()
		if err == nil && n != len(dead) {
			w.violation("PurgeAllDead purged %d of %d", n, len(dead))
		}
		for _, m := range dead {
			w.gone(m, now)
		}
		return "purge-all-dead", w.apply(err, dead, fill(len(dead), fpState{kind: fpGone}))
	}
}

func fill(n int, s fpState) []fpState {
	out := make([]fpState, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// advance moves the clock; the open forgets the ids whose window passed.
func (w *fpWorkload) advance(d time.Duration) {
	w.clock.Advance(d)
	w.forget()
}

// forget marks the acked ids the open's window no longer keeps: acked
// more than the window ago (an id acked exactly the window ago is still
// within it), or any with no window. The open forgot them: a retry is
// accepted, and its next snapshot keeps the forget.
func (w *fpWorkload) forget() {
	now := w.clock.Now()
	for _, m := range w.msgs {
		if m.cur.kind == fpGone && !m.ackedAt.IsZero() && (w.window == 0 || now.Sub(m.ackedAt) > w.window) {
			m.forgot = true
		}
	}
}

func (w *fpWorkload) requeueExpired() error {
	now := w.clock.Now()
	var ms []*fpMsg
	for _, tok := range fpTokens(w.msgs) {
		if m := w.msgs[tok]; m.cur.kind == fpLeased && !m.cur.at.After(now) {
			ms = append(ms, m)
		}
	}
	w.held = slices.DeleteFunc(w.held, func(h fpHeld) bool { return !h.msg.cur.at.After(now) })
	n, err := w.q.RequeueExpired()
	if err == nil && n != len(ms) {
		w.violation("RequeueExpired at %v ended %d leases, the model %d", now, n, len(ms))
	}
	return w.apply(err, ms, fill(len(ms), fpState{kind: fpReady}))
}

// reopen closes the queue and opens it again with another window; the
// leases keep running across a clean Close.
func (w *fpWorkload) reopen() (string, error) {
	if err := w.q.Close(); err != nil {
		w.q = nil
		return "Close", err
	}
	w.durable()
	w.closeLast = true
	w.window = []time.Duration{0, 5 * time.Second, fpWindow, 40 * time.Second}[w.rng.IntN(4)]
	w.forget()
	q, err := queue.Open(w.dir, w.options())
	w.q = q
	return "Open", err
}

// fpClass is what an observation of a recovered queue saw of a message.
type fpClass string

const (
	fpSeenReady fpClass = "ready"   // delivered at the crash's time
	fpSeenLater fpClass = "later"   // delivered only once the clock moved a day on
	fpSeenDead  fpClass = "dead"    // listed by DeadLetters
	fpSeenGone  fpClass = "missing" // not seen
)

// fpEnd is how a run ended.
type fpEnd uint8

const (
	fpCrashed fpEnd = iota // a call other than Close or Open failed: the crash ended every lease
	fpClosed               // a clean Close, no crash: the leases run on
	fpEither               // the crash came during a Close or an Open, or nothing written since a Close survived: either
)

// end says how the run ended.
func (run *fpCrashRun) end() fpEnd {
	switch {
	case run.crashed == "":
		return fpClosed
	case run.crashed == "Close" || run.crashed == "Open" || run.w.closeLast:
		return fpEither
	}
	return fpCrashed
}

// classes returns what an observation at now may see of a message in s,
// after a run that ended as end says.
func (s fpState) classes(now time.Time, end fpEnd) []fpClass {
	switch s.kind {
	case fpReady:
		return []fpClass{fpSeenReady}
	case fpDelayed:
		if s.at.After(now) {
			return []fpClass{fpSeenLater}
		}
		return []fpClass{fpSeenReady}
	case fpLeased:
		kept := []fpClass{fpSeenLater} // a clean Close kept the lease
		if !s.at.After(now) {
			kept = append(kept, fpSeenReady) // the open may end it, as it ran out
		}
		switch end {
		case fpCrashed:
			return []fpClass{fpSeenReady} // the crash ended the lease
		case fpClosed:
			return kept
		}
		return append(kept, fpSeenReady)
	case fpDead:
		return []fpClass{fpSeenDead}
	}
	return []fpClass{fpSeenGone}
}

// observe opens the recovered queue in dir at the crash's time with
// window, probes the ids the model says it must refuse, and sees where
// every message is. It returns how many ids it probed.
func (w *fpWorkload) observe(dir string, window time.Duration, end fpEnd, counts map[string]int) (int, error) {
	clock := newManualClock()
	now := w.clock.Now()
	clock.Advance(now.Sub(clock.Now()))
	// The workload's SegmentSize, as its application reopens with: the
	// default, larger one would take states for torn rolls that it refuses.
	q, err := queue.Open(dir, &queue.Options{Sync: queue.SyncNever, Clock: clock, ManualRequeue: true,
		MaxDeliveries: -1, AckTimeout: time.Hour, SnapshotBytes: 1 << 30, DedupWindow: window,
		SegmentSize: w.options().SegmentSize})
	if err != nil {
		return 0, err
	}
	defer q.Close()
	probes, err := w.probeIDs(q, now, window)
	if err != nil {
		return probes, err
	}
	seen := make(map[string]fpClass)
	if err := w.seeDead(q, seen); err != nil {
		return probes, err
	}
	if err := w.seeReady(q, seen, fpSeenReady); err != nil {
		return probes, err
	}
	clock.Advance(48 * time.Hour)
	if _, err := q.RequeueExpired(); err != nil {
		return probes, err
	}
	if err := w.seeReady(q, seen, fpSeenLater); err != nil {
		return probes, err
	}
	return probes, w.judge(seen, now, end, counts)
}

// probeIDs enqueues with every producer id the model says is refused.
func (w *fpWorkload) probeIDs(q *queue.Queue, now time.Time, window time.Duration) (int, error) {
	n := 0
	for _, pid := range w.pids {
		m := w.byPID[pid]
		if !w.mustRefuse(m, now, window) {
			continue
		}
		n++
		_, err := q.Enqueue(context.Background(), payload("probe-"+pid, 10), queue.WithID(pid))
		if !errors.Is(err, queue.ErrDuplicate) {
			return n, fmt.Errorf("an enqueue with id %s (its message %s %v, acked at %v, now %v) returned %v, not ErrDuplicate",
				pid, m.tok, m.cur.kind, m.ackedAt, now, err)
		}
	}
	return n, nil
}

// seeDead lists the dead letters and checks their payloads.
func (w *fpWorkload) seeDead(q *queue.Queue, seen map[string]fpClass) error {
	ds, err := q.DeadLetters(0, 0)
	if err != nil {
		return err
	}
	for _, d := range ds {
		if err := w.see(seen, d.Payload, d.ID, fpSeenDead); err != nil {
			return err
		}
	}
	return nil
}

// seeReady delivers and acks everything ready now.
func (w *fpWorkload) seeReady(q *queue.Queue, seen map[string]fpClass, c fpClass) error {
	for {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := w.see(seen, m.Payload, m.ID, c); err != nil {
			return err
		}
		if err := m.Ack(); err != nil {
			return err
		}
	}
}

// see records a message the observation met, checking its payload and id.
func (w *fpWorkload) see(seen map[string]fpClass, p []byte, id string, c fpClass) error {
	tok := tokenOf(p)
	m := w.msgs[tok]
	switch {
	case m == nil:
		return fmt.Errorf("%s %q: never enqueued", c, tok)
	case !bytes.Equal(p, payload(m.tok, m.pad)):
		return fmt.Errorf("%s %s: with another payload (%d bytes)", c, tok, len(p))
	case m.pid != "" && id != m.pid:
		return fmt.Errorf("%s %s: with id %q, enqueued with %q", c, tok, id, m.pid)
	case seen[tok] != "":
		return fmt.Errorf("%s %s: seen before as %s", c, tok, seen[tok])
	}
	seen[tok] = c
	return nil
}

// judge checks that every message was seen as one of the states the model
// allows it.
func (w *fpWorkload) judge(seen map[string]fpClass, now time.Time, end fpEnd, counts map[string]int) error {
	for _, tok := range fpTokens(w.msgs) {
		m := w.msgs[tok]
		got := seen[tok]
		if got == "" {
			got = fpSeenGone
		}
		counts[string(got)]++
		var allowed []fpClass
		for _, s := range append([]fpState{m.cur}, m.alts...) {
			allowed = append(allowed, s.classes(now, end)...)
		}
		if !containsClass(allowed, got) {
			return fmt.Errorf("%s seen %s, the model allows %v (now %v; state %v at %v, alternatives %v)",
				tok, got, fpUniq(allowed), now, m.cur.kind, m.cur.at, m.alts)
		}
	}
	return nil
}

func containsClass(cs []fpClass, c fpClass) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

func fpUniq(cs []fpClass) []string {
	set := make(map[string]bool)
	for _, c := range cs {
		set[string(c)] = true
	}
	out := make([]string, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

func (k fpKind) String() string {
	return [...]string{"absent", "ready", "delayed", "leased", "dead", "gone"}[k]
}

// fpTokens returns the tokens of msgs, sorted, so that the calls the
// workload makes depend on its seed alone.
func fpTokens(msgs map[string]*fpMsg) []string {
	out := make([]string, 0, len(msgs))
	for tok := range msgs {
		out = append(out, tok)
	}
	sort.Strings(out)
	return out
}
