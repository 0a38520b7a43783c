package fuzz_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walq/walq/queue"
)

// TestKill9Dedup holds producer ids to their promise across kill -9 while
// the housekeeper compacts back to back: a child process enqueues with
// producer ids (Enqueue, EnqueueBatch, EnqueueAsync), retries ids whose
// enqueue returned (in this child or an earlier one: every retry must fail
// with ErrDuplicate, a batch with a fresh id beside a known one as a whole),
// consumes (ack, nack, dead-letter then PurgeDead, leases left to run out)
// with 4 KiB segments, a DedupWindow of an hour, MaxDeliveries 2 and,
// drawn per cycle, SnapshotBytes 1 (compactions back to back) or 16 KiB.
// While the child runs, the parent opens the queue read-only again and
// again (viewBeside). It SIGKILLs the child at a random moment, then opens
// a copy of the directory and checks:
//
//   - every id whose enqueue returned is refused (ErrDuplicate), live,
//     dead or acked (the window never passes in the test);
//   - every message drained carries its own id's payload, and no id is
//     twice in the drain; a message whose enqueue returned and whose ack or
//     purge never started is there; an id whose ack or purge returned is not;
//   - an id whose enqueue the kill cut is either refused or accepted, and
//     the ids of one batch share one fate; an id a copy accepted (the
//     enqueue left no trace) must be accepted again by the next child's
//     retry, never refused;
//   - the ids of a batch refused for a known id are never enqueued.
//
// The kill -9 loops of kill9_test.go give ids but never retry them, and
// featurepl_test.go retries them on a crash file system one call at a
// time: this test adds concurrent producers, consumers and compactions.
//
// Short run: 12 cycles (4 under -race; more while none judged a probe,
// see dedupExtraCycles). Long run:
//
//	WALQ_DEDUP_CYCLES=500 go test ./fuzz -run '^TestKill9Dedup$' -timeout 1h -v
func TestKill9Dedup(t *testing.T) { runKill9Dedup(t, time.Hour) }

// TestKill9DedupWindow is TestKill9Dedup with a DedupWindow of a second,
// which ids acked in earlier cycles outlive: the parent's probe of an id
// acked or purged must be refused while its window surely runs (the probe
// returned less than the window after the ack started, less
// dedupMargin), and accepted once it surely ran out (the probe started
// more than the window after the ack returned, plus dedupMargin), whatever
// compactions and kills came between. Its children retry no id (a retry
// could meet the window's end).
//
// Short run: 12 cycles (4 under -race; more while none judged a probe,
// see dedupExtraCycles). Long run:
//
//	WALQ_DEDUP_CYCLES=500 go test ./fuzz -run '^TestKill9DedupWindow$' -timeout 1h -v
func TestKill9DedupWindow(t *testing.T) { runKill9Dedup(t, time.Second) }

// dedupMargin is how far from the window's end a probe is judged: the
// queue's clock reads the system clock through the monotonic one,
// rebased every millisecond (queue/clock.go).
const dedupMargin = 5 * time.Millisecond

// runKill9Dedup runs the cycles with the children's DedupWindow window,
// or the child when this process is one.
func runKill9Dedup(t *testing.T, window time.Duration) {
	if cfg := childConfigFromEnv(t, "kill9dedup"); cfg != nil {
		runDedupChild(cfg)
		return
	}
	cycles := envInt(t, "WALQ_DEDUP_CYCLES", scaled(12, 3))
	rng, _ := testRand(t)
	h := &dedupParent{t: t, rng: rng, window: window, dir: t.TempDir(), side: t.TempDir(), ids: make(map[string]*dedupID)}
	start := time.Now()
	// A loaded machine (a child killed before any enqueue returned, acks
	// not yet a window old) may judge nothing in the cycles asked for:
	// more cycles are run then, up to dedupExtraCycles times as many.
	cycle := 1
	for ; cycle <= cycles || !h.judged() && cycle <= cycles*(1+dedupExtraCycles); cycle++ {
		h.cycle(cycle)
	}
	cycles = cycle - 1
	t.Logf("SUMMARY kill9dedup window=%v: cycles=%d ids=%d enqueued=%d acked=%d refused-probes=%d accepted-probes=%d resolved-present=%d resolved-absent=%d retried-absent=%d child-retries=%d read-only-views=%d (refused %d) violations=0 in %v",
		window, cycles, len(h.ids), h.enqueued, h.acked, h.refused, h.accepted, h.present, h.absent, h.retried, h.childRetries, h.views, h.viewsRefused, time.Since(start).Round(time.Millisecond))
	if !h.judged() {
		t.Fatal("no probe was judged: the test no longer covers dedup")
	}
	if h.views == 0 { // each cycle views once after its kill, with no writer
		t.Fatalf("every one of %d read-only views refused to read: the views were not checked", h.viewsRefused)
	}
}

// dedupExtraCycles is how many times the cycles asked for runKill9Dedup
// may run again while no probe was judged.
const dedupExtraCycles = 4

// judged says whether the checks judged enough to cover dedup: a probe
// refused, and a child's retry refused (a window of an hour) or a probe
// accepted past the window (a second).
func (h *dedupParent) judged() bool {
	return h.refused > 0 && (h.childRetries > 0 || h.accepted > 0)
}

// dedupOptions are the options of the child cfg.
func dedupOptions(cfg *childConfig) queue.Options {
	return queue.Options{Sync: queue.SyncMode(cfg.Sync), SegmentSize: 4096, SnapshotBytes: cfg.Snapshot,
		DedupWindow: cfg.Window, MaxDeliveries: 2, AckTimeout: 200 * time.Millisecond}
}

// dedupProbeOptions open a copy for the parent's checks: the children's
// segments and window, no compaction, no delivery limit, leases that do
// not run out.
func dedupProbeOptions(window time.Duration) queue.Options {
	return queue.Options{Sync: queue.SyncNever, SegmentSize: 4096, SnapshotBytes: 1 << 30,
		DedupWindow: window, MaxDeliveries: -1, AckTimeout: time.Hour, ManualRequeue: true}
}

// dedupPad is the payload size past the id.
const dedupPad = 60

// dedupFate is what the parent knows of an id's enqueue.
type dedupFate uint8

const (
	fateStarted dedupFate = iota + 1 // an enqueue started; its outcome is not known
	fatePresent                      // an enqueue returned, or a recovery showed it took effect
	fateAbsent                       // a recovery showed no enqueue of it took effect
)

// dedupID is the parent's record of one producer id.
type dedupID struct {
	fate     dedupFate
	ackStart int64  // unix ns before the first ack or purge of it started (0: none)
	acked    int64  // unix ns after an ack or purge of it returned (0: none)
	group    string // the batch it was last attempted in ("" alone)
}

// dedupParent is the parent side of TestKill9Dedup.
type dedupParent struct {
	t         *testing.T
	rng       *rand.Rand
	window    time.Duration       // the children's DedupWindow
	dir, side string              // the queue's directory; where the id files go
	ids       map[string]*dedupID // every id a child reported
	opened    func()              // called at the child's "o" line, once it opened the queue
	bad       []string            // violations reported by the child or found by the checks

	enqueued, acked, refused, accepted, present, absent, retried, childRetries, views, viewsRefused int // the summary's counts
}

func (h *dedupParent) cycle(n int) {
	t := h.t
	file := h.writeIDs(n)
	cfg := childConfig{Mode: "kill9dedup", Dir: h.dir, Cycle: n, Seed: h.rng.Uint64(), Sync: pickSync(h.rng),
		Lifetime: time.Minute, IDs: file, Window: h.window, Snapshot: []int64{1, 16 << 10}[h.rng.IntN(2)]}
	run := 50*time.Millisecond + time.Duration(h.rng.Int64N(int64(350*time.Millisecond)))
	if raceEnabled {
		run *= 3
	}
	c := startChild(t, t.Name(), cfg)
	viewed, opened := make(chan []string, 1), make(chan struct{})
	h.opened = func() { close(opened) }
	go func() { viewed <- h.viewBeside(opened, c.done) }()
	c.runFor(run, h.apply)
	h.bad = append(h.bad, <-viewed...)
	what := fmt.Sprintf("cycle %d (sync %d, SnapshotBytes %d, killed after %v)", n, cfg.Sync, cfg.Snapshot, run)
	if !c.killed() {
		t.Fatalf("%s: the child was not killed but exited (%v); its output:\n%s", what, c.err, c.output())
	}
	if r := c.raceReport(); r != "" {
		t.Fatalf("%s: the race detector found a data race in the child:\n%s", what, r)
	}
	if len(h.bad) > 0 {
		t.Fatalf("%s: the child saw: %s\nits output:\n%s", what, strings.Join(h.bad, "; "), c.output())
	}
	if err := h.check(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if len(h.bad) > 0 {
		t.Fatalf("%s: %s", what, strings.Join(h.bad, "; "))
	}
}

// viewBeside opens the queue read-only, again and again, once the child
// has opened it (opened is closed: a view before would keep it out with
// its shared lock) while it writes, compacts and is killed (until done
// is closed, and once after), and checks every message a view shows: Browse of each state,
// Peek of what it lists, DeadLetters. A view may refuse to read (the
// writer removed a file under it), never with ErrCorrupt (a kill -9 leaves
// a torn tail at most), and never shows a payload that is not its id's. It
// returns what it found wrong.
func (h *dedupParent) viewBeside(opened, done <-chan struct{}) []string {
	var bad []string
	select {
	case <-opened:
	case <-done:
	}
	for last := false; !last; {
		select {
		case <-done:
			last = true
		default:
		}
		err := dedupView(h.dir)
		switch {
		case errors.Is(err, queue.ErrCorrupt) || errors.Is(err, errWrongPayload):
			bad = append(bad, fmt.Sprintf("read-only view beside the child (last %v): %v", last, err))
		case err != nil:
			h.viewsRefused++
		default:
			h.views++
		}
	}
	return bad
}

// errWrongPayload marks a view that showed a message with a payload that
// is not its id's.
var errWrongPayload = errors.New("wrong payload")

// dedupView opens dir read-only and checks what it shows.
func dedupView(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "log")); err != nil {
		return nil // the first child has not made the queue yet
	}
	r, err := queue.Open(dir, &queue.Options{ReadOnly: true, SegmentSize: 4096})
	if err != nil {
		return err
	}
	defer r.Close()
	for st := queue.StateReady; st <= queue.StateDead; st++ {
		infos, err := r.Browse(st, 0, 64)
		if err != nil {
			return fmt.Errorf("browse %s: %w", st, err)
		}
		for _, info := range infos {
			m, err := r.Peek(info.Seq)
			if err != nil {
				return fmt.Errorf("peek %d: %w", info.Seq, err)
			}
			if m.ID != info.ID || string(m.Payload) != string(payload(info.ID, dedupPad)) {
				return fmt.Errorf("%w: peek %d (%s, %s): id %s, payload %.40q", errWrongPayload, info.Seq, info.ID, st, m.ID, m.Payload)
			}
		}
	}
	dead, err := r.DeadLetters(0, 64)
	if err != nil {
		return fmt.Errorf("dead letters: %w", err)
	}
	for _, d := range dead {
		if string(d.Payload) != string(payload(d.ID, dedupPad)) {
			return fmt.Errorf("%w: dead letter %s: payload %.40q", errWrongPayload, d.ID, d.Payload)
		}
	}
	return nil
}

// writeIDs writes the ids the next child retries: a sample of those known
// present (it must be refused; under a window of an hour only), and every
// one known absent (it must be accepted). It returns the file's path.
func (h *dedupParent) writeIDs(n int) string {
	var b strings.Builder
	known := 0
	for _, id := range dedupIDs(h.ids) {
		switch h.ids[id].fate {
		case fatePresent:
			if h.window == time.Hour && known < 2000 && h.rng.IntN(4) == 0 {
				fmt.Fprintf(&b, "known %s\n", id)
				known++
			}
		case fateAbsent:
			fmt.Fprintf(&b, "absent %s\n", id)
		}
	}
	path := filepath.Join(h.side, fmt.Sprintf("ids-%d", n))
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		h.t.Fatal(err)
	}
	return path
}

// Report lines of the child (child_test.go's reporter), one id each:
//
//	a  enqueue of the id started       e  it returned success
//	g  "g ID,ID,...": a batch of these ids started (each also has an a line)
//	d  the id's message was delivered  k  "k ID NS": an ack or purge started after NS
//	K  "K ID NS": the ack or purge returned before NS (unix ns)
//	n  "n N": N retries refused as they must be
//	o  the child opened the queue (no argument)
//	!  a violation the child saw
func (h *dedupParent) apply(l string) {
	if len(l) < 2 {
		return
	}
	code, arg := l[0], l[2:]
	switch code {
	case 'a':
		id := h.get(arg)
		if id.fate == fateAbsent {
			h.retried++
		}
		if id.fate != fatePresent {
			id.fate, id.group = fateStarted, ""
		}
	case 'g':
		for _, s := range strings.Split(arg, ",") {
			h.get(s).group = arg
		}
	case 'e':
		h.get(arg).fate = fatePresent
		h.enqueued++
	case 'd': // a delivery reported late (kill9_test.go's lateDelivery) is no violation here
		// Its enqueue's "a" line came first (one pipe, written in order):
		// an id without one (a retry's fresh "x…" id) was never enqueued.
		if id := h.ids[arg]; id == nil || id.fate == fateAbsent {
			h.bad = append(h.bad, fmt.Sprintf("%s delivered, never enqueued (or after a recovery showed it absent)", arg))
		} else {
			id.fate = fatePresent
		}
	case 'k':
		s, ns := cutInt(arg, " ")
		if id := h.get(s); id.ackStart == 0 {
			id.ackStart = ns
		}
	case 'K':
		s, ns := cutInt(arg, " ")
		h.get(s).acked = ns
		h.acked++
	case 'o':
		h.opened()
	case 'n':
		var k int
		fmt.Sscan(arg, &k)
		h.childRetries += k
	case '!':
		h.bad = append(h.bad, arg)
	}
}

func (h *dedupParent) get(s string) *dedupID {
	id := h.ids[s]
	if id == nil {
		id = &dedupID{}
		h.ids[s] = id
	}
	return id
}

// check opens a copy of the directory as the kill left it and holds it to
// what the child reported (see TestKill9Dedup), resolving every enqueue
// the kill cut.
func (h *dedupParent) check() error {
	img := scratchDir(h.t)
	if err := copyDir(h.dir, img); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(img, "log")); err != nil {
		return nil // killed before its Open made the queue
	}
	if v, err := queue.Verify(img, &queue.VerifyOptions{SegmentSize: 4096}); err != nil || v.Damaged() > 0 {
		return fmt.Errorf("Verify of the copy: %v %+v", err, v)
	}
	o := dedupProbeOptions(h.window)
	q, err := queue.Open(img, &o)
	if err != nil {
		return fmt.Errorf("open of the copy: %w", err)
	}
	defer q.Close()
	drained, err := dedupDrain(q)
	if err != nil {
		return err
	}
	h.checkDrain(drained)
	for _, s := range dedupIDs(h.ids) {
		if h.ids[s].fate == fatePresent {
			h.probe(q, s)
		}
	}
	return h.resolve(q)
}

// probe enqueues the id s, known present, in the copy q: refused while it
// is live or its ack's window surely runs, whatever became of its message;
// accepted once the window of its ack surely ran out.
func (h *dedupParent) probe(q *queue.Queue, s string) {
	id := h.ids[s]
	start := time.Now().UnixNano()
	err := dedupEnqueue(q, s)
	end := time.Now().UnixNano()
	w, m := int64(h.window), int64(dedupMargin)
	switch {
	case id.ackStart == 0 || end < id.ackStart+w-m:
		if !errors.Is(err, queue.ErrDuplicate) {
			h.bad = append(h.bad, fmt.Sprintf("%s, whose enqueue returned, is accepted again after the kill (%s): %v", s, h.since(id, end), err))
		}
		h.refused++
	case id.acked != 0 && start > id.acked+w+m:
		if err != nil {
			h.bad = append(h.bad, fmt.Sprintf("%s, acked or purged past the window (%s), is refused after the kill: %v", s, h.since(id, start), err))
		}
		h.accepted++
	}
}

// since says how long before at the ack of id started and returned.
func (h *dedupParent) since(id *dedupID, at int64) string {
	if id.ackStart == 0 {
		return "no ack started"
	}
	s := fmt.Sprintf("ack started %v before", time.Duration(at-id.ackStart))
	if id.acked != 0 {
		s += fmt.Sprintf(", returned %v before", time.Duration(at-id.acked))
	}
	return s
}

// dedupDrain ends the dead set and leases every message of q; it returns
// their payloads by id, and fails on an id twice.
func dedupDrain(q *queue.Queue) (map[string][]byte, error) {
	if _, err := q.RequeueAllDead(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	got := make(map[string][]byte)
	for q.Stats().Ready > 0 {
		ms, err := q.DequeueBatch(ctx, 4096)
		if err != nil {
			return nil, fmt.Errorf("drain with %d ready: %w", q.Stats().Ready, err)
		}
		for _, m := range ms {
			if _, dup := got[m.ID]; dup {
				return nil, fmt.Errorf("id %s twice in one drain", m.ID)
			}
			got[m.ID] = m.Payload
		}
	}
	return got, nil
}

// checkDrain holds the drained messages to the reports.
func (h *dedupParent) checkDrain(drained map[string][]byte) {
	for s, p := range drained {
		id := h.ids[s]
		switch {
		case id == nil || id.fate == fateAbsent:
			h.bad = append(h.bad, fmt.Sprintf("%s drained, never enqueued (or after a recovery showed it absent)", s))
			continue
		case string(p) != string(payload(s, dedupPad)):
			h.bad = append(h.bad, fmt.Sprintf("%s drained with another payload: %.40q", s, p))
		case id.acked != 0:
			h.bad = append(h.bad, fmt.Sprintf("%s drained after its ack or purge returned", s))
		}
		if id.fate == fateStarted {
			h.present++
		}
		id.fate = fatePresent
	}
	for _, s := range dedupIDs(h.ids) {
		if id := h.ids[s]; id.fate == fatePresent && id.ackStart == 0 && drained[s] == nil {
			h.bad = append(h.bad, fmt.Sprintf("%s lost: its enqueue returned, no ack or purge started", s))
		}
	}
}

// resolve decides every enqueue the kill cut by an enqueue of its id in
// the copy: refused, it took effect; accepted, it left nothing. The ids
// of one batch must share their fate.
func (h *dedupParent) resolve(q *queue.Queue) error {
	groups := make(map[string]dedupFate)
	for _, s := range dedupIDs(h.ids) {
		id := h.ids[s]
		if id.fate != fateStarted {
			continue
		}
		err := dedupEnqueue(q, s)
		switch {
		case errors.Is(err, queue.ErrDuplicate):
			id.fate = fatePresent
			h.present++
		case err == nil:
			id.fate = fateAbsent
			h.absent++
		default:
			return fmt.Errorf("probe of %s: %w", s, err)
		}
		if id.group == "" {
			continue
		}
		if f, ok := groups[id.group]; ok && f != id.fate {
			h.bad = append(h.bad, fmt.Sprintf("batch %s kept in part: %s %v, an earlier id %v", id.group, s, id.fate, f))
		}
		groups[id.group] = id.fate
	}
	// A batch id that a drain or a delivery showed present before this
	// check decides the group too.
	for g, f := range groups {
		for _, s := range strings.Split(g, ",") {
			if h.ids[s].fate != f {
				h.bad = append(h.bad, fmt.Sprintf("batch %s kept in part: %s %v, others %v", g, s, h.ids[s].fate, f))
			}
		}
	}
	return nil
}

// dedupEnqueue enqueues the message of id with its producer id.
func dedupEnqueue(q *queue.Queue, id string) error {
	_, err := q.Enqueue(context.Background(), payload(id, dedupPad), queue.WithID(id))
	return err
}

// dedupChild is the child side of TestKill9Dedup.
type dedupChild struct {
	cfg    *childConfig
	rep    *reporter
	q      *queue.Queue
	known  []string      // ids of earlier children whose enqueue took effect
	credit chan struct{} // a token per message the producers may add
	mu     sync.Mutex
	mine   []string // ids whose enqueue returned in this child; guarded by mu
}

// runDedupChild opens the queue, retries the ids the parent found absent,
// and runs producers and consumers until it is killed.
func runDedupChild(cfg *childConfig) {
	c := &dedupChild{cfg: cfg, rep: newReporter(), credit: make(chan struct{}, 1024)}
	go func() {
		time.Sleep(cfg.Lifetime)
		os.Exit(0) // the parent is gone
	}()
	absent, err := c.readIDs()
	if err != nil {
		c.rep.failf("read ids: %v", err)
		os.Exit(2)
	}
	o := dedupOptions(cfg)
	if c.q, err = queue.Open(cfg.Dir, &o); err != nil {
		c.rep.failf("open after a crash: %v", err)
		os.Exit(2)
	}
	c.rep.line('o', "")
	for _, id := range absent {
		c.rep.line('a', id)
		if err := dedupEnqueue(c.q, id); err != nil {
			c.rep.failf("%s, which a recovery showed absent, is refused: %v", id, err)
			continue
		}
		c.rep.line('e', id)
	}
	st := c.q.Stats()
	for range max(0, 1024-int(st.Ready+st.Delayed+st.InFlight+st.Dead)) {
		c.credit <- struct{}{}
	}
	for i := range 2 {
		go c.produce(i)
	}
	go c.consume(2)
	c.consume(3)
}

// readIDs loads the parent's file: the known ids, and the absent ones it
// returns.
func (c *dedupChild) readIDs() ([]string, error) {
	f, err := os.Open(c.cfg.IDs)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var absent []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		kind, id, _ := strings.Cut(sc.Text(), " ")
		if kind == "known" {
			c.known = append(c.known, id)
		} else {
			absent = append(absent, id)
		}
	}
	return absent, sc.Err()
}

func (c *dedupChild) rng(i int) *rand.Rand { return rand.New(rand.NewPCG(c.cfg.Seed, uint64(i))) }

// produce enqueues fresh ids one, a batch or a burst of EnqueueAsync at a
// time, and after each retries an id whose enqueue took effect.
func (c *dedupChild) produce(g int) {
	rng := c.rng(g)
	for i := 0; ; i++ {
		prefix := fmt.Sprintf("c%d-%d-%d", c.cfg.Cycle, g, i)
		switch r := rng.IntN(4); {
		case r < 2:
			c.produceOne(prefix)
		case r == 2:
			c.produceBatch(prefix, 2+rng.IntN(3))
		default:
			c.produceAsync(prefix, 1+rng.IntN(4))
		}
		if c.cfg.Window == time.Hour {
			c.retry(rng, prefix)
		}
	}
}

func (c *dedupChild) produceOne(id string) {
	<-c.credit
	c.rep.line('a', id)
	if err := dedupEnqueue(c.q, id); err != nil {
		c.rep.failf("enqueue of fresh id %s: %v", id, err)
		return
	}
	c.enqueued(id)
}

func (c *dedupChild) produceBatch(prefix string, n int) {
	items, ids := make([]queue.Item, n), make([]string, n)
	for k := range items {
		<-c.credit
		ids[k] = fmt.Sprintf("%s.%d", prefix, k)
		items[k] = queue.Item{ID: ids[k], Payload: payload(ids[k], dedupPad)}
	}
	c.rep.line('a', ids...)
	c.rep.line('g', strings.Join(ids, ","))
	if _, err := c.q.EnqueueBatch(context.Background(), items); err != nil {
		c.rep.failf("batch of fresh ids %v: %v", ids, err)
		return
	}
	c.enqueued(ids...)
}

func (c *dedupChild) produceAsync(prefix string, n int) {
	ps, ids := make([]*queue.Pending, n), make([]string, n)
	for k := range ps {
		<-c.credit
		ids[k] = fmt.Sprintf("%s.%d", prefix, k)
		c.rep.line('a', ids[k])
		p, err := c.q.EnqueueAsync(context.Background(), payload(ids[k], dedupPad), queue.WithID(ids[k]))
		if err != nil {
			c.rep.failf("EnqueueAsync of fresh id %s: %v", ids[k], err)
			return
		}
		ps[k] = p
	}
	for k, p := range ps {
		if err := p.Wait(context.Background()); err != nil {
			c.rep.failf("EnqueueAsync of fresh id %s completed with %v", ids[k], err)
			return
		}
		c.enqueued(ids[k])
	}
}

// enqueued reports ids whose enqueue returned and keeps them for retries.
func (c *dedupChild) enqueued(ids ...string) {
	c.rep.line('e', ids...)
	c.mu.Lock()
	c.mine = append(c.mine, ids...)
	c.mu.Unlock()
}

// retry enqueues again an id whose enqueue took effect (an earlier
// child's, or this one's): alone, in a batch beside a fresh id (named
// "x…", never reported: a drain that finds it fails), or asynchronously.
// Each must fail with ErrDuplicate.
func (c *dedupChild) retry(rng *rand.Rand, prefix string) {
	c.mu.Lock()
	var id string
	if n := len(c.known) + len(c.mine); n > 0 {
		if k := rng.IntN(n); k < len(c.known) {
			id = c.known[k]
		} else {
			id = c.mine[k-len(c.known)]
		}
	}
	c.mu.Unlock()
	if id == "" {
		return
	}
	var err error
	switch rng.IntN(3) {
	case 0:
		err = dedupEnqueue(c.q, id)
	case 1:
		fresh := "x" + prefix
		items := []queue.Item{{ID: fresh, Payload: payload(fresh, dedupPad)}, {ID: id, Payload: payload(id, dedupPad)}}
		_, err = c.q.EnqueueBatch(context.Background(), slices.Clip(items))
	default:
		var p *queue.Pending
		if p, err = c.q.EnqueueAsync(context.Background(), payload(id, dedupPad), queue.WithID(id)); err == nil {
			err = p.Wait(context.Background())
		}
	}
	if !errors.Is(err, queue.ErrDuplicate) {
		c.rep.failf("retry of %s, whose enqueue took effect: %v, not ErrDuplicate", id, err)
		return
	}
	c.rep.line('n', "1")
}

// consume delivers and acks most messages; some are nacked, some
// dead-lettered and purged, some left for their lease to run out.
func (c *dedupChild) consume(g int) {
	rng := c.rng(g)
	ctx := context.Background()
	for i := 0; ; i++ {
		m, err := c.q.Dequeue(ctx)
		if err != nil {
			c.rep.failf("dequeue: %v", err)
			return
		}
		c.rep.line('d', m.ID)
		if string(m.Payload) != string(payload(m.ID, dedupPad)) {
			c.rep.failf("%s delivered with another payload: %.40q", m.ID, m.Payload)
		}
		switch r := rng.IntN(10); {
		case r < 7:
			c.ackStart(m.ID)
			c.settled(m.ID, m.Ack(), true)
		case r == 7:
			c.settled(m.ID, m.Nack(0), false)
		case r == 8:
			if err := m.DeadLetter("test"); err != nil {
				c.settled(m.ID, err, false)
				break
			}
			c.ackStart(m.ID)
			c.settled(m.ID, c.q.PurgeDead(m.ID), true)
		}
		if i%50 == 49 {
			if _, err := c.q.RequeueAllDead(); err != nil {
				c.rep.failf("RequeueAllDead: %v", err)
			}
		}
	}
}

// ackStart reports that an ack or purge of id starts now.
func (c *dedupChild) ackStart(id string) {
	c.rep.line('k', fmt.Sprintf("%s %d", id, time.Now().UnixNano()))
}

// settled reports the outcome of a settle of id; gone says whether it
// removes the message (an ack or a purge), which gives a producer credit.
// A lease that ran out (ErrLeaseLost), or a purge of a message a requeue
// took back (ErrNotFound), is allowed.
func (c *dedupChild) settled(id string, err error, gone bool) {
	switch {
	case err == nil && gone:
		c.rep.line('K', fmt.Sprintf("%s %d", id, time.Now().UnixNano()))
		select {
		case c.credit <- struct{}{}:
		default: // a retried id's message, enqueued without credit
		}
	case err == nil, errors.Is(err, queue.ErrLeaseLost), errors.Is(err, queue.ErrNotFound):
	default:
		c.rep.failf("settle of %s: %v", id, err)
	}
}

// dedupIDs returns the parent's ids in order, so that a seed replays the
// same probes.
func dedupIDs(m map[string]*dedupID) []string {
	ids := make([]string, 0, len(m))
	for s := range m {
		ids = append(ids, s)
	}
	slices.Sort(ids)
	return ids
}
