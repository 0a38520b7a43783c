package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walq/walq/fuzz"
	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestPowerLoss runs a workload on a crash file system (internal/crashfs)
// that keeps only what was made durable: a file's data by an fsync or
// fdatasync of that file, a name by an fsync of its directory. The run
// "loses power" at the Nth durable operation, for every N the workload
// reaches: that call and every later one fail, so nothing more becomes
// durable. From each crash, several states a power loss can leave are
// built in fresh directories (names as last fsynced, as cached, or mixed;
// unsynced bytes dropped, kept in part, torn, zeroed, or with a hole), and
// each is opened with the real file system and the workload's
// SegmentSize, drained and judged by the Oracle.
//
// The Oracle is fed with what the callers were told, never with walq's own
// durability accounting: under SyncAlways every call that returned nil
// (an asynchronous call: its Pending reported done) before the crash is
// acknowledged; under SyncInterval and SyncNever, whose calls return
// before the fsync, only those made before a Compact (a snapshot) or a
// Close that returned nil, and the others are attempts. (The time bound of
// SyncInterval is not checked: the crash file system has no clock.) In every mode the recovered queue must also be the state after
// some operation between the last acknowledged one and the crash (the log
// is cut at one point: no holes). A state with a hole in its unsynced bytes
// may be refused with ErrCorrupt (walq does not guess past damage followed
// by valid entries), never opened wrong. Each state is first verified
// (queue.Verify), which must find nothing but a torn tail, and opened
// read-only, which must show the messages the writable open then
// delivers, and one state in three is also drained, from a copy, by a
// salvaging open, which must deliver them too, and repaired, from another
// copy, by queue.Repair, which must succeed and leave them.
//
// Long run: WALQ_POWERLOSS_STATES=200000 go test ./fuzz -run '^TestPowerLoss$' -timeout 1h -v
// (the workload is the same; each crash point gets more states).
//
// Under the race detector it checks 1,000 states: the workload, whose
// asynchronous calls and committer run side by side, still runs to every
// crash point, and each point gets fewer states (about 10: every kind of
// state still drawn at each), which are built and drained by one caller,
// so that more of them prove nothing more about races. fuzz/ci.sh runs
// the 10,000 without it.
func TestPowerLoss(t *testing.T) {
	states := envInt(t, "WALQ_POWERLOSS_STATES", scaled(10000, 10))
	var total plSummary
	for _, c := range []struct {
		name   string
		mode   queue.SyncMode
		states int
	}{
		{"always", queue.SyncAlways, states * 6 / 10},
		{"interval", queue.SyncInterval, states * 2 / 10},
		{"never", queue.SyncNever, states * 2 / 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, seed := testRand(t)
			s, err := powerLoss(t, plConfig{mode: c.mode, states: c.states, seed: seed})
			t.Logf("SUMMARY powerloss-%s: %s", c.name, s)
			if err != nil {
				t.Fatalf("%v\n(replay: WALQ_SEED=%d WALQ_POWERLOSS_POINT=<the durable operation>)", err, seed)
			}
			total = total.add(s)
		})
	}
	t.Logf("SUMMARY powerloss: %s", total)
}

// TestPowerLossCatchesPlantedBugs plants each durability bug the power-loss
// test exists for (internal/testhook.PlantLogBug) and checks that the test
// reports a violation, so that its passing on the real code means
// something:
//
//   - early-durable: commits complete before the fsync that covers them;
//   - no-roll-dir-sync: the directory is not fsynced after a segment roll,
//     so the new segment's name may vanish with the records in it;
//   - no-seal-sync: a sealed segment is counted durable on tidwall/wal's
//     own fsync, which the file system never saw (the log's behaviour
//     before it fsynced sealed segments itself).
func TestPowerLossCatchesPlantedBugs(t *testing.T) {
	for _, bug := range []string{"early-durable", "no-roll-dir-sync", "no-seal-sync"} {
		t.Run(bug, func(t *testing.T) {
			_, seed := testRand(t)
			s, err := powerLoss(t, plConfig{mode: queue.SyncAlways, states: 2000, seed: seed, bug: bug})
			if err == nil {
				t.Fatalf("with %s planted, %s: no violation found", bug, s)
			}
			t.Logf("with %s planted, after %d states: %v", bug, s.states, err)
		})
	}
}

// plConfig is one power-loss run.
type plConfig struct {
	mode   queue.SyncMode
	states int    // crash states to check, about
	seed   uint64 // the workload's and the states' generator
	bug    string // a planted bug; "" for none
	// a bug planted only in the Open and Close that
	// TestPowerLossDuringRecovery crashes again; "" for none
	reopenBug string
	// one call at a time (an asynchronous one awaited), no background
	// compaction, and under SyncAlways a settle after each call
	// (settlesEach): the same crash points in every run
	serial bool
}

// plOps is the workload's length: short, so that every crash point is
// reached by many states.
const plOps = 60

// plSummary counts what a run checked.
type plSummary struct {
	points  int // crash points (durable operations) the workload reached
	states  int // crash states checked
	refused int // states with a hole or reordered writes that Open refused (ErrCorrupt)
	names   int // states built with names as cached or mixed, not as last fsynced
	torn    int // states whose Open cut a torn tail
	rolls   int // of those, torn rolls (the segment after a torn sealed one removed)
	res     fuzz.Result
	syncOps map[string]int // durable operations of the whole workload, by kind
}

func (s plSummary) add(o plSummary) plSummary {
	s.points, s.states, s.refused, s.names = s.points+o.points, s.states+o.states, s.refused+o.refused, s.names+o.names
	s.torn, s.rolls = s.torn+o.torn, s.rolls+o.rolls
	s.res = s.res.Add(o.res)
	return s
}

func (s plSummary) String() string {
	return fmt.Sprintf("crash-points=%d states=%d refused(hole-or-reordered)=%d names-cached-or-mixed=%d torn-tails-cut=%d torn-rolls-repaired=%d durable-ops=%v lost=%d unexpected=%d redelivered-after-ack=%d duplicates(allowed)=%d",
		s.points, s.states, s.refused, s.names, s.torn, s.rolls, s.syncOps, s.res.Lost, s.res.Unexpected, s.res.RedeliveredAfterAck, s.res.Duplicates)
}

// powerLoss runs the workload once without a crash to count its durable
// operations, then crashes it at each one (and at its end) on as many
// workers as there are CPUs, and checks the states built from each crash.
// It returns the first violation.
func powerLoss(t *testing.T, cfg plConfig) (plSummary, error) {
	base := scratchDir(t)
	dry, err := runCrashWorkload(filepath.Join(base, "dry"), cfg, 0)
	if err != nil {
		return plSummary{}, err
	}
	npoints := dry.durable + 1
	s := plSummary{syncOps: dry.kinds}
	perPoint := max(1, (cfg.states+npoints-1)/npoints)
	s, err = checkCrashPoints(base, npoints, envInt(t, "WALQ_POWERLOSS_POINT", 0), s, func(scratch string, n int) (plSummary, error) {
		return checkCrashPoint(scratch, cfg, n, perPoint)
	})
	s.points = npoints
	return s, err
}

// checkCrashPoint runs the workload crashing at durable operation n (past
// its end: a power loss after it) and checks perPoint states built from
// the crash.
func checkCrashPoint(scratch string, cfg plConfig, n, perPoint int) (plSummary, error) {
	var s plSummary
	root := filepath.Join(scratch, fmt.Sprint("run-", n))
	defer os.RemoveAll(root)
	run, err := runCrashWorkload(root, cfg, n)
	if err != nil {
		return s, err
	}
	for v := range perPoint {
		dst := filepath.Join(scratch, fmt.Sprint("state-", n, "-", v))
		rng := rand.New(rand.NewPCG(cfg.seed, uint64(n)<<20|uint64(v)))
		st, err := run.fsys.Materialize(dst, rng)
		if err != nil {
			return s, err
		}
		what := fmt.Sprintf("crash at durable operation %d (%s), state %d: %s", n, run.crashed, v, st.Desc)
		r, rec, err := run.check(dst, cfg.mode, st, v%3 == 0)
		os.RemoveAll(dst)
		s.states++
		s.res = s.res.Add(r)
		switch t := rec.Log.Torn; {
		case rec.refused:
			s.refused++
		case t != nil && strings.Contains(t.Reason, "segment roll"):
			s.torn, s.rolls = s.torn+1, s.rolls+1
		case t != nil:
			s.torn++
		}
		if st.Desc[:len("names as last")] != "names as last" {
			s.names++
		}
		if err != nil {
			return s, fmt.Errorf("%s: %w", what, err)
		}
	}
	return s, nil
}

// plCrashRun is one run of the workload and what its callers were told.
type plCrashRun struct {
	fsys    *crashfs.FS
	ops     []plOp         // in call order
	flushed int            // ops[:flushed] were followed by a Compact or Close that returned nil
	durable int            // durable operations made
	kinds   map[string]int // durable operations made, by kind
	crashed string         // the call the crash came during; "" when none did
}

// plOp is one call of the workload and its outcome.
type plOp struct {
	kind   string
	enq    []string // tokens enqueued, in order
	acks   []string // tokens acked, in order
	ok     bool     // the caller was told success (asynchronous: its Pending reported done with nil)
	failed bool     // the call returned an error: the crash
}

// plSegmentSize is the workload's SegmentSize: small, so that it rolls.
const plSegmentSize = 4096

// runCrashWorkload runs the workload in root on a crash file system that
// crashes at durable operation crashAt (0: never), closes the queue and
// takes the image.
func runCrashWorkload(root string, cfg plConfig, crashAt int) (*plCrashRun, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	fsys, err := crashfs.New(root, crashAt)
	if err != nil {
		return nil, err
	}
	run := &plCrashRun{fsys: fsys, crashed: "Open"}
	clock := newManualClock()
	opts := &queue.Options{Sync: cfg.mode, SyncInterval: time.Millisecond, SegmentSize: plSegmentSize, SnapshotBytes: 8000,
		ManualRequeue: true, MaxDeliveries: 3, AckTimeout: 5 * time.Second, Clock: clock, FS: fsys}
	if cfg.bug != "" {
		testhook.SetLogOptions(opts, func(o any) { testhook.PlantLogBug(o, cfg.bug) })
	}
	if cfg.serial {
		testhook.SetManualCompaction(opts)
	}
	q, err := queue.Open(filepath.Join(root, "q"), opts)
	if err == nil {
		w := &plWorkload{q: q, rng: rand.New(rand.NewPCG(cfg.seed, 7)), clock: clock,
			serial: cfg.serial, settleEach: settlesEach(cfg.serial, cfg.mode)}
		if w.settleEach {
			w.fsys = fsys // bursts: several callers' records in one fsync
		}
		run.crashed = w.run(run)
		err = q.Close()
		if err == nil {
			run.flushed, run.crashed = len(run.ops), ""
		} else if run.crashed == "" {
			run.crashed = "Close"
		}
		w.reap(run) // what Close completed
	}
	if err != nil && !fsys.Crashed() {
		return nil, fmt.Errorf("no crash yet (%s), and: %w", run.crashed, err)
	}
	if err := fsys.Image(); err != nil {
		return nil, err
	}
	run.durable, run.kinds = fsys.Ops()
	return run, nil
}

// plWorkload drives the queue from one goroutine.
type plWorkload struct {
	q          *queue.Queue
	rng        *rand.Rand
	clock      interface{ Advance(time.Duration) }
	held       []*queue.Message // delivered, not acked or given back
	n          int              // tokens made
	flying     []plFlight       // asynchronous calls not yet reported done
	serial     bool             // one call at a time: plConfig.serial
	settleEach bool             // settle after each call: settlesEach
	// the crash file system, when the workload makes bursts (burst): a
	// serial one under SyncAlways, whose calls' records otherwise never
	// share an fsync
	fsys *crashfs.FS
}

// plFlight is an asynchronous call and the op that records it.
type plFlight struct {
	p  *queue.Pending
	op int // index in plCrashRun.ops
}

// run runs the workload until it ends or a call fails (the crash), and
// returns the call the crash came during ("" when none did).
func (w *plWorkload) run(run *plCrashRun) string {
	for range plOps {
		if w.fsys != nil && w.rng.IntN(10) == 0 {
			if crashed := w.burst(run); crashed != "" {
				return crashed
			}
			continue
		}
		op, p := w.step()
		run.ops = append(run.ops, op)
		if p != nil {
			w.flying = append(w.flying, plFlight{p: p, op: len(run.ops) - 1})
			if w.serial {
				<-p.Done()
			}
		}
		w.reap(run)
		if op.failed {
			return op.kind
		}
		if w.settleEach {
			if err := settle(w.q); err != nil {
				return "flush after " + op.kind
			}
		}
		if op.kind == "compact" {
			run.flushed = len(run.ops) // a snapshot of everything so far
		}
	}
	return ""
}

// burstCallers is how many asynchronous enqueues a burst makes.
const burstCallers = 4

// burst makes burstCallers asynchronous enqueues whose records the log
// writes while the fsync of the first is held (crashfs.HoldNext), so that
// the next fsync covers the other callers' records together, at the same
// durable operation in every run: a crash there leaves several callers'
// records in one unsynced group, a tail a serial workload under
// SyncAlways leaves no other way. It waits for every caller, then settles,
// and returns the call the crash came during ("" when none did).
func (w *plWorkload) burst(run *plCrashRun) string {
	ctx := context.Background()
	reached, release := w.fsys.HoldNext("q/log/")
	defer release()
	for i := range burstCallers {
		tok := w.token()
		p, err := w.q.EnqueueAsync(ctx, payload(tok, 100+w.rng.IntN(200)))
		op := done(plOp{kind: "burst-enqueue", enq: []string{tok}}, err)
		op.ok = false // once its Pending reports done
		run.ops = append(run.ops, op)
		if err != nil {
			return op.kind
		}
		w.flying = append(w.flying, plFlight{p: p, op: len(run.ops) - 1})
		if i == 0 {
			select { // the first caller's fsync is held; the others write meanwhile
			case <-reached:
			case <-p.Done():
			}
		}
	}
	release()
	for _, f := range w.flying {
		<-f.p.Done()
	}
	w.reap(run)
	for _, op := range run.ops[len(run.ops)-burstCallers:] {
		if !op.ok {
			return "burst-enqueue"
		}
	}
	if err := settle(w.q); err != nil {
		return "flush after burst-enqueue"
	}
	return ""
}

// reap marks the asynchronous calls whose Pending reported done with nil.
func (w *plWorkload) reap(run *plCrashRun) {
	left := w.flying[:0]
	for _, f := range w.flying {
		select {
		case <-f.p.Done():
			run.ops[f.op].ok = f.p.Err() == nil
		default:
			left = append(left, f)
		}
	}
	w.flying = left
}

func (w *plWorkload) token() string {
	w.n++
	return fmt.Sprintf("P%d", w.n)
}

// done fills in a call's outcome.
func done(op plOp, err error) plOp {
	op.ok, op.failed = err == nil, err != nil
	return op
}

// step makes one random call; an asynchronous one returns its Pending.
func (w *plWorkload) step() (plOp, *queue.Pending) {
	ctx, rng := context.Background(), w.rng
	switch r := rng.IntN(100); {
	case r < 30:
		tok := w.token()
		var opts []queue.EnqueueOption
		if rng.IntN(10) == 0 {
			opts = append(opts, queue.WithDelay(time.Second))
		}
		_, err := w.q.Enqueue(ctx, payload(tok, 100+rng.IntN(300)), opts...)
		return done(plOp{kind: "enqueue", enq: []string{tok}}, err), nil
	case r < 38:
		op := plOp{kind: "batch"}
		items := make([]queue.Item, 2+rng.IntN(3))
		for i := range items {
			op.enq = append(op.enq, w.token())
			items[i] = queue.Item{Payload: payload(op.enq[i], 100+rng.IntN(200))}
		}
		_, err := w.q.EnqueueBatch(ctx, items)
		return done(op, err), nil
	case r < 46:
		tok := w.token()
		p, err := w.q.EnqueueAsync(ctx, payload(tok, 100+rng.IntN(300)))
		op := done(plOp{kind: "async-enqueue", enq: []string{tok}}, err)
		op.ok = false // once its Pending reports done
		return op, p
	case r < 66:
		return w.dequeue(), nil
	case r < 92:
		return w.settle(rng.IntN(100))
	case r < 95:
		return done(plOp{kind: "flush"}, w.q.Flush(ctx)), nil
	case r < 97:
		return done(plOp{kind: "compact"}, w.q.Compact()), nil
	default:
		w.clock.Advance(6 * time.Second)
		_, err := w.q.RequeueExpired()
		w.held = nil
		return done(plOp{kind: "expire"}, err), nil
	}
}

func (w *plWorkload) dequeue() plOp {
	m, err := w.q.TryDequeue()
	if errors.Is(err, queue.ErrEmpty) {
		return plOp{kind: "dequeue-empty", ok: true}
	}
	if err == nil {
		w.held = append(w.held, m)
	}
	return done(plOp{kind: "dequeue"}, err)
}

// settle acks (one, a batch, or a batch asynchronously), nacks or
// dead-letters held messages.
func (w *plWorkload) settle(r int) (plOp, *queue.Pending) {
	if len(w.held) == 0 {
		return plOp{kind: "nothing held", ok: true}, nil
	}
	n := 1
	if r >= 60 && r < 85 {
		n += w.rng.IntN(min(3, len(w.held)))
	}
	ms := queue.Messages(w.held[:n])
	w.held = append([]*queue.Message(nil), w.held[n:]...)
	var toks []string
	for _, m := range ms {
		toks = append(toks, tokenOf(m.Payload))
	}
	switch {
	case r < 60:
		return done(plOp{kind: "ack", acks: toks}, ms[0].Ack()), nil
	case r < 75:
		return done(plOp{kind: "batch-ack", acks: toks}, ms.Ack()), nil
	case r < 85:
		p, err := ms.AckAsync()
		op := done(plOp{kind: "async-ack", acks: toks}, err)
		op.ok = false // once its Pending reports done
		return op, p
	case r < 95:
		return done(plOp{kind: "nack"}, ms[0].Nack(0)), nil
	default:
		return done(plOp{kind: "dead-letter"}, ms[0].DeadLetter("power loss test")), nil
	}
}

// acked reports whether the caller of ops[i] was told that it is durable,
// as the sync mode documents it.
func (run *plCrashRun) acked(i int, mode queue.SyncMode) bool {
	op := run.ops[i]
	return !op.failed && (i < run.flushed || mode == queue.SyncAlways && op.ok)
}

// oracle returns an Oracle fed with what the callers were told.
func (run *plCrashRun) oracle(mode queue.SyncMode) *fuzz.Oracle {
	o := fuzz.NewOracle()
	for i, op := range run.ops {
		acked := run.acked(i, mode)
		for _, tok := range op.enq {
			o.EnqueueAttempt(tok)
			if acked {
				o.Enqueued(tok)
			}
		}
		for _, tok := range op.acks {
			o.AckAttempt(tok)
			if acked {
				o.Acked(tok)
			}
		}
	}
	return o
}

// check drains the crash state in dir, opened with the workload's
// SegmentSize as the application's own Open would, and judges it. A state with a hole
// or with writes reordered across segments (reordered) may be refused
// with ErrCorrupt; refused says so. Verify, run first with the
// workload's SegmentSize, must accept a state the open opens
// (verifyAgrees); a read-only open of the state, made
// first, must show what the drain delivers (sameView), and so must, with
// salvage set, a salvaging open of a copy (sameSalvage) and a repair of
// another (sameRepair).
func (run *plCrashRun) check(dir string, mode queue.SyncMode, st crashfs.State, salvage bool) (fuzz.Result, plRecovery, error) {
	var sd, rd drained
	var sErr, rErr error
	if salvage {
		var err error
		if sd, sErr, err = salvageCopy(dir, plSegmentSize); err != nil {
			return fuzz.Result{}, plRecovery{}, err
		}
		if rd, rErr, err = repairCopy(dir, plSegmentSize); err != nil {
			return fuzz.Result{}, plRecovery{}, err
		}
	}
	_, vErr := queue.Verify(filepath.Join(dir, "q"), &queue.VerifyOptions{SegmentSize: plSegmentSize})
	ro, roErr := readOnlyView(filepath.Join(dir, "q"), plSegmentSize)
	d, err := drainWith(filepath.Join(dir, "q"), drainOptionsAs(plSegmentSize))
	if err != nil {
		if errors.Is(err, queue.ErrCorrupt) && (st.MayRefuse(dir) || reordered(st)) {
			return fuzz.Result{}, plRecovery{refused: true}, nil
		}
		return fuzz.Result{}, plRecovery{}, fmt.Errorf("open and drain: %w", err)
	}
	rec := plRecovery{Recovery: d.recovery}
	if err := verifyAgrees(vErr, d.recovery); err != nil {
		return fuzz.Result{}, rec, err
	}
	if err := sameView(ro, roErr, d); err != nil {
		return fuzz.Result{}, rec, err
	}
	if err := sameSalvage(sd, sErr, d); salvage && err != nil {
		return fuzz.Result{}, rec, err
	}
	if err := sameRepair(rd, rErr, d); salvage && err != nil {
		return fuzz.Result{}, rec, err
	}
	o := run.oracle(mode)
	if r := o.Recovered(d.tokens); !r.OK() {
		return o.Result(), rec, fmt.Errorf("%s", r)
	}
	return o.Result(), rec, run.checkPrefix(d.tokens, mode)
}

// plRecovery is what the Open of a crash state found.
type plRecovery struct {
	queue.Recovery
	refused bool // a state with a hole, refused with ErrCorrupt
}

// reordered reports whether a log segment lost bytes written to it while a
// later segment kept bytes written after them: a valid entry then follows
// damage, which is what mid-log damage looks like, and walq refuses to
// guess (ErrCorrupt; Options.Salvage opens it). Nothing acknowledged is at
// risk: the bytes were not fsynced. (On a real disk tidwall/wal's fsync of
// a segment before it creates the next rules the state out.)
func reordered(st crashfs.State) bool {
	first := ""
	for _, p := range st.Lost {
		if isLogSegment(p) && (first == "" || p < first) {
			first = p
		}
	}
	for _, p := range st.Kept {
		if first != "" && isLogSegment(p) && p > first {
			return true
		}
	}
	return false
}

func isLogSegment(rel string) bool {
	return filepath.Dir(rel) == filepath.Join("q", "log") && len(filepath.Base(rel)) == 20
}

// checkPrefix checks that the drained set is the state after some
// operation p at or after the last one acknowledged, with perhaps a
// prefix of operation p+1's batch: the log lost no record while keeping a
// later one. Operations are numbered from 1; 0 is the empty queue.
func (run *plCrashRun) checkPrefix(drained []string, mode queue.SyncMode) error {
	from := run.flushed
	for i, op := range run.ops {
		if run.acked(i, mode) && len(op.enq)+len(op.acks) > 0 {
			from = max(from, i+1)
		}
	}
	got := make(map[string]bool, len(drained))
	for _, tok := range drained {
		got[tok] = true
	}
	for p := len(run.ops); p >= from; p-- {
		if run.matches(got, p) {
			return nil
		}
	}
	return fmt.Errorf("the recovered queue (%d messages) is not the state after any operation in [%d, %d]: the log lost a record and kept a later one", len(drained), from, len(run.ops))
}

// matches reports whether got is the live set after operation p, plus a
// prefix of operation p+1's enqueues (all or none of an EnqueueBatch's) or
// minus a prefix of its acks.
func (run *plCrashRun) matches(got map[string]bool, p int) bool {
	enqAt, ackAt, pos, ackPos := make(map[string]int), make(map[string]int), make(map[string]int), make(map[string]int)
	for i, op := range run.ops {
		for j, tok := range op.enq {
			enqAt[tok], pos[tok] = i+1, j
		}
		for j, tok := range op.acks {
			ackAt[tok], ackPos[tok] = i+1, j
		}
	}
	extra, gone := 0, 0
	for tok, at := range enqAt {
		ack, acked := ackAt[tok]
		live := at <= p && (!acked || ack > p)
		switch {
		case live && !got[tok] && ack == p+1:
			gone++ // acked by operation p+1's batch, which may survive as a prefix
		case live && !got[tok]:
			return false
		case !live && got[tok]:
			if at != p+1 {
				return false
			}
			extra++
		}
	}
	for tok, ack := range ackAt { // the acked ones must be the batch ack's first ones
		if ack == p+1 && ackPos[tok] < gone && got[tok] {
			return false
		}
	}
	if p < len(run.ops) && run.ops[p].kind == "batch" && extra != 0 && extra != len(run.ops[p].enq) {
		return false // an EnqueueBatch is one log entry: all of it or none
	}
	for tok, at := range enqAt { // the extras must be the batch's first ones
		if at == p+1 && pos[tok] < extra && !got[tok] {
			return false
		}
	}
	return true
}
