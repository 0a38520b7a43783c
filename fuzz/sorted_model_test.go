package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/queue"
)

// FuzzSortedModel is FuzzQueueModel for the sorted and windowed queues: a
// header (sortedConfig) chooses the form (Sorted[int64] or Windowed, with
// or without SingleFlight), the segment size, snapshot threshold, sync
// mode, delivery limit, payload cache and payload sizes; the operations
// (publish, pull, ack, nack with or without a delay, extend, dead-letter,
// clock advance and expiry, clock step back, compaction, stats, clean
// close and reopen, crash-image reopen) run on a real queue and on
// sortedModel: every pulled batch (which key, which values in which
// order, their delivery counts), every outcome (nil, ErrLeaseLost,
// ErrEmpty), the counts and, at the end, a full drain must agree.
//
//	go test ./fuzz -run '^$' -fuzz '^FuzzSortedModel$' -fuzztime 30s
func FuzzSortedModel(f *testing.F) {
	fuzzModel(f, sortedSeeds, func(t *testing.T, in *opReader) *sortedRun { return newSortedRun(t, readSortedConfig(in)) })
}

// sortedSeeds are hand-written inputs: the seven header bytes (form,
// segment, snapshot, sync, deliveries, cache, pad; see readSortedConfig),
// then operations (see sortedRun.step), built by the functions below.
var sortedSeeds = [][]byte{
	// Sorted: three keys pulled in sort-key order, an ack, a nack, a key
	// pulled again with its delivery counted, an expiry.
	slices.Concat([]byte{0, 0, 0, 0, 0, 0, 0}, sPub(1, 5, 0), sPub(2, -1, 0), sPub(0, 3, 0), sPub(1, -2, 0),
		sPull(2), sPull(1), sAck(0), sNack(0, 0), sStats, sPull(6), sPub(3, -4, 0), sAdv(12), sStats, sPull(6), sAck(1)),
	// Single flight: a key with a leased batch is not pulled again; a nack
	// with a delay holds the key; extend; dead-letter.
	slices.Concat([]byte{1, 0, 0, 0, 0, 0, 0}, sPub(1, 0, 0), sPub(1, 2, 0), sPull(1), sPub(1, -3, 0), sPub(2, 9, 0),
		sPull(5), sStats, sNack(0, 2), sPull(5), sStats, sAdv(1), sPull(5), sExtend(0, 15), sAdv(12), sStats,
		sDead(0), sAdv(1), sStats, sAck(0)),
	// Windowed: values wait for their window, a value published after the
	// key's batch was pulled starts a new window.
	slices.Concat([]byte{2, 0, 0, 0, 0, 0, 0}, sPub(1, 0, 0), sAdv(1), sPub(2, 0, 0), sPull(5), sAdv(2), sStats,
		sPull(5), sPub(1, 0, 0), sAdv(1), sPull(5), sStats, sAdv(3), sPull(5), sAck(0), sAck(0), sNack(0, 1)),
	// Windowed, single flight, one delivery: nack and expiry move values to
	// the dead set; a clean reopen keeps a lease; a crash ends one.
	slices.Concat([]byte{3, 0, 0, 1, 1, 0, 0}, sPub(0, 0, 0), sPub(1, 0, 0), sPub(2, 0, 0), sAdv(4), sPull(1),
		sNack(0, 0), sPull(1), sPub(0, 0, 0), sAdv(4), sReopen, sPull(5), sStats, sAdv(11), sStats, sPull(5), sCrash,
		sStats, sAck(0), sAck(0)),
	// 4 KiB segments, 4 KiB payloads, no cache (payloads read back from the
	// log), SyncAlways, a 4 KiB snapshot threshold: a dead value pins the
	// log while others churn, and the housekeeper copies it forward; then
	// a crash and a reopen.
	slices.Concat([]byte{0, 1, 1, 1, 1, 1, 2}, sPub(0, 0, 250), sPull(1), sDead(0), sortedChurn(16, 250),
		sPub(2, 4, 100), sCrash, sStats, sPull(3), sReopen, sStats, sAck(0)),
	// Windowed under SyncInterval with 8 KiB segments and a small cache: a
	// key held by a nack delay pins the log; Compact copies it forward.
	slices.Concat([]byte{2, 2, 0, 2, 4, 2, 2}, sPub(0, 0, 250), sAdv(4), sPull(1), sNack(0, 2), sortedChurn(12, 250),
		sCompact, sStats, sCrash, sAdv(20), sPull(2), sNack(0, 0), sCompact, sReopen, sStats),
	// The inputs below change the policy at each reopen (policyFlag; see
	// sReopenAs). Sorted, a limit of 5 lowered to 2: the pull that reaches
	// a key whose value had three deliveries dead-letters it and pulls the
	// next key; a crash under the walq tool's open (no limit) returns a
	// batch, a reopen with a limit of 1 dead-letters its values at a pull.
	slices.Concat([]byte{policyFlag, 0, 0, 0, 3, 0, 0}, sPub(0, 0, 0), sPub(1, 1, 0), sPull(1), sNack(0, 0),
		sPull(1), sNack(0, 0), sPull(1), sNack(0, 0), sStats, sReopenAs(2), sStats, sPull(1), sStats,
		sPub(0, 2, 0), sCrashAs(128), sPull(1), sNack(0, 0), sPull(6), sStats, sReopenAs(1), sAdv(11), sStats,
		sPull(6), sStats),
	// Windowed, single flight, a limit of 1: a crash under the tool's open
	// returns the batch; a new value joins the key; the batch is pulled
	// again with two values past the limit and nacked; a reopen with a
	// limit of 1 dead-letters the key's values at the next pull.
	slices.Concat([]byte{policyFlag | 3, 0, 0, 0, 1, 0, 0}, sPub(0, 0, 0), sPub(0, 0, 0), sPub(1, 0, 0), sAdv(4),
		sPull(1), sCrashAs(128), sPub(0, 0, 0), sAdv(4), sPull(1), sNack(1, 0), sStats, sReopenAs(1), sAdv(4),
		sStats, sPull(6), sStats, sPub(0, 0, 0), sAdv(4), sPull(6), sAck(2)),
	// AckTimeout shortened to 2 s: a batch pulled before the reopen keeps
	// 10 s, one pulled after runs out in 2 s; SyncAlways, then SyncInterval
	// at a crash with a limit raised to 5.
	slices.Concat([]byte{policyFlag, 0, 0, 0, 1, 0, 0}, sPub(0, 0, 0), sPub(1, 1, 0), sPull(1), sReopenAs(15),
		sPull(1), sAdv(3), sStats, sReopenAs(45), sPull(6), sCrashAs(93), sStats, sPull(6), sAdv(11), sStats),
	// Sorted, the clock stepping back: a key whose nack delay had passed
	// and that was not pulled since is held again, across a crash; a pull
	// ends a key's hold, so a value published after it is not held by a
	// step back; a lease runs until its deadline by the clock, so a step
	// back lengthens it by the step.
	slices.Concat([]byte{0, 0, 0, 0, 0, 0, 0}, sPub(1, 0, 0), sPub(2, 1, 0), sPull(1), sNack(0, 2), sAdv(3), sStats,
		sBack(4), sStats, sPull(5), sCrash, sStats, sAdv(4), sPull(1), sAck(1), sPub(1, 0, 0), sBack(6), sPull(1),
		sAdv(9), sBack(10), sStats, sAck(1), sPull(5), sAdv(11), sStats, sPull(5)),
	// Windowed, single flight: a key whose window had closed is held again
	// by a step back until it closes by the new clock; a value published
	// after the step back carries the earlier time and leads its key; a
	// nack delay passed and stepped back over across a clean reopen.
	slices.Concat([]byte{3, 0, 0, 0, 0, 0, 0}, sPub(0, 0, 0), sAdv(4), sStats, sBack(2), sStats, sPull(5), sPub(1, 0, 0),
		sAdv(3), sBack(8), sPub(1, 0, 0), sAdv(4), sPull(5), sNack(0, 2), sAdv(3), sReopen, sBack(2), sStats,
		sPull(5), sAdv(8), sPull(5), sAck(0), sAck(0)),
	// Sorted: two batches of one key, nacked with 2 s and then 1 s: the
	// key keeps the later hold, so the first batch's value is not pulled
	// before its delay has passed.
	slices.Concat([]byte{0, 0, 0, 0, 0, 0, 0}, sPub(0, 0, 0), sPull(1), sPub(0, 1, 0), sPull(1), sNack(0, 2),
		sNack(0, 1), sAdv(1), sStats, sPull(5), sAdv(1), sPull(5), sAck(0)),
}

// sReopenAs and sCrashAs are a reopen and a crash whose open applies the
// policy b (see readPolicy).
func sReopenAs(b byte) []byte { return []byte{10, b} }
func sCrashAs(b byte) []byte  { return []byte{11, b} }

// The operations of a sorted seed. which picks a held batch by its index
// (held batches in pull order; a settled one leaves the list).
func sPub(key, sort int, size byte) []byte { return []byte{0, byte(key + 4*(sort+4)), size} }
func sPull(max int) []byte                 { return []byte{3, byte(max - 1)} }
func sAck(which byte) []byte               { return []byte{4, which, 0} }
func sNack(which, delay byte) []byte       { return []byte{5, which, delay} }
func sExtend(which, d byte) []byte         { return []byte{6, which, d - 1} }
func sDead(which byte) []byte              { return []byte{7, which, 0} }
func sAdv(sec byte) []byte                 { return []byte{8, sec - 1} }
func sBack(sec byte) []byte                { return []byte{8, 0 - sec/2} } // sec even, 2 to 40

var (
	sCompact = []byte{9}
	sReopen  = []byte{10}
	sCrash   = []byte{11}
	sStats   = []byte{12}
)

// sortedChurn returns n rounds of publish (payload arg) to key 1, a clock
// advance past any window, pull and ack: records that the log accumulates
// and a compaction could drop, were it not for older values.
func sortedChurn(n int, arg byte) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		b = slices.Concat(b, sPub(1, 0, arg), sAdv(4), sPull(1), sAck(255))
	}
	return b
}

// sortedConfig is what a FuzzSortedModel input's header chooses.
type sortedConfig struct {
	windowed bool  // Windowed (window sortedWindow) rather than Sorted[int64]
	single   bool  // SortedOptions.SingleFlight
	cache    int64 // SortedOptions.CacheBytes
	modelConfig
}

// sortedWindow is the windowed form's window.
const sortedWindow = 3 * time.Second

// cacheChoices: the default, none (every payload read back from the log),
// a few payloads.
var cacheChoices = []int64{0, -1, 200}

// readSortedConfig reads the header: form, segment, snapshot, sync,
// deliveries, cache, pad.
func readSortedConfig(in *opReader) sortedConfig {
	form := in.next()
	c := sortedConfig{windowed: form&2 != 0, single: form&1 != 0}
	c.policies = form&policyFlag != 0
	c.segment, c.snapshot = choose(in, segmentChoices), choose(in, snapshotChoices)
	c.sync, c.maxDeliver = choose(in, syncChoices), choose(in, deliverChoices)
	c.cache, c.pad = choose(in, cacheChoices), choose(in, padChoices)
	return c
}

// sortedView is an open Sorted[int64] or Windowed, seen through the calls
// the fuzzer makes: the two differ in their sort key type and in Publish.
type sortedView struct {
	publish  func(sort int64, key string, p []byte) error
	pull     func(max int) ([]pulledBatch, error)
	ack      func(lease uint64) error
	nack     func(lease uint64, d time.Duration) error
	requeue  func() (int, error)
	stats    func() queue.Stats
	recovery func() queue.Recovery
	compact  func() error
	close    func() error
	dead     func() ([]pulledValue, error) // the dead values in Seq order, each with its reason
}

// pulledBatch is a batch as Pull returned it, its sort keys as int64 (unix
// ns for the windowed form).
type pulledBatch struct {
	key    string
	lease  uint64
	values []pulledValue
	extend func(d time.Duration) error
	dead   func(reason string) error
}

type pulledValue struct {
	tok        string
	sort, at   int64 // sort key; publish time (unix ns)
	deliveries int
	reason     string // a dead value's
}

func batchesOf[K queue.SortKey](bs []*queue.Batch[K], sortOf func(K) int64) []pulledBatch {
	out := make([]pulledBatch, len(bs))
	for i, b := range bs {
		out[i] = pulledBatch{key: b.Key, lease: b.Receipt.Lease, extend: b.Extend, dead: b.DeadLetter}
		for _, v := range b.Values {
			out[i].values = append(out[i].values, pulledValue{tok: tokenOf(v.Payload), sort: sortOf(v.Sort),
				at: v.PublishedAt.UnixNano(), deliveries: v.Deliveries})
		}
	}
	return out
}

// viewOf returns the view of a Sorted queue; publish, when set, replaces
// its Publish (the windowed form stamps the time itself).
func viewOf[K queue.SortKey](s *queue.Sorted[K], sortOf func(K) int64, publish func(int64, string, []byte) error) sortedView {
	return sortedView{
		publish: publish,
		pull: func(max int) ([]pulledBatch, error) {
			bs, err := s.TryPull(max)
			return batchesOf(bs, sortOf), err
		},
		ack:     func(lease uint64) error { return s.Ack(queue.BatchReceipt{Lease: lease}) },
		nack:    func(lease uint64, d time.Duration) error { return s.Nack(queue.BatchReceipt{Lease: lease}, d) },
		requeue: s.RequeueExpired, stats: s.Stats, recovery: s.Recovery,
		compact: s.Compact, close: s.Close,
		dead: func() ([]pulledValue, error) {
			ds, err := s.DeadValues(0, 0)
			out := make([]pulledValue, len(ds))
			for i, d := range ds {
				out[i] = pulledValue{tok: tokenOf(d.Payload), sort: sortOf(d.Sort), at: d.PublishedAt.UnixNano(),
					deliveries: d.Deliveries, reason: d.Reason}
			}
			return out, err
		},
	}
}

func openSortedView(dir string, c sortedConfig, clock *fakeclock.Clock, ackTimeout time.Duration) (sortedView, error) {
	so := queue.SortedOptions{Options: c.options(clock, ackTimeout), SingleFlight: c.single, CacheBytes: c.cache}
	ctx := context.Background()
	if c.windowed {
		w, err := queue.OpenWindowed(dir, &queue.WindowOptions{SortedOptions: so, Window: sortedWindow})
		if err != nil {
			return sortedView{}, err
		}
		return viewOf(w.Sorted, func(t time.Time) int64 { return t.UnixNano() },
			func(_ int64, key string, p []byte) error { return w.Publish(ctx, key, p) }), nil
	}
	s, err := queue.OpenSorted[int64](dir, &so)
	if err != nil {
		return sortedView{}, err
	}
	return viewOf(s, func(k int64) int64 { return k },
		func(sort int64, key string, p []byte) error { return s.Publish(ctx, sort, key, p) }), nil
}

// sortedRun is one FuzzSortedModel input being run.
type sortedRun struct {
	t      *testing.T
	cfg    sortedConfig
	dir    string
	clock  *fakeclock.Clock
	q      sortedView
	opened bool // q is open
	gen    int  // opens so far: a batch's extend and dead-letter work on its own queue only
	m      *sortedModel
	held   []heldBatch
	n      int      // tokens made
	log    []string // operations so far, for failure messages

	// unflushed: RequeueExpired (or Open's crash requeue) appended records
	// without waiting for them; a crash copy must not race with their write.
	unflushed bool
}

// heldBatch is a pulled batch the test holds, with its model lease and the
// queue generation it was pulled from.
type heldBatch struct {
	b     pulledBatch
	lease int
	gen   int
}

func newSortedRun(t *testing.T, c sortedConfig) *sortedRun {
	r := &sortedRun{t: t, cfg: c, dir: scratchDir(t), clock: newManualClock(),
		m: newSortedModel(c.maxDeliver, 10*time.Second, c.single)}
	if c.windowed {
		r.m.window = int64(sortedWindow)
	}
	r.open()
	return r
}

func (r *sortedRun) open() {
	q, err := openSortedView(r.dir, r.cfg, r.clock, r.m.ackTimeout)
	if err != nil {
		r.failf("open: %v", err)
	}
	r.q, r.opened = q, true
	r.gen++
}

func (r *sortedRun) close() {
	if r.opened {
		r.q.close()
	}
}

func (r *sortedRun) failf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%+v, after %s: %s", r.cfg, strings.Join(r.log, ", "), fmt.Sprintf(format, args...))
}

func (r *sortedRun) logf(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf(format, args...))
}

func (r *sortedRun) now() int64 { return r.clock.Now().UnixNano() }

// step runs one operation.
func (r *sortedRun) step(in *opReader) {
	switch op := in.next() % 13; op {
	case 0, 1, 2:
		r.publish(in.next(), in.next())
	case 3:
		r.pull(1 + in.next()%6)
	case 4, 5, 6, 7:
		r.settle(op, in.next(), in.next())
	case 8:
		r.moveClock(in.next())
	case 9:
		r.compact("compact")
	case 10:
		r.changePolicy(in)
		r.reopen()
	case 11:
		r.changePolicy(in)
		r.crash()
	case 12:
		r.stats()
	}
}

// publish adds a value: key k0..k3, sort key -4..11 (the windowed form:
// the clock), payload padded by arg.
func (r *sortedRun) publish(keyArg, arg int) {
	r.n++
	tok := fmt.Sprintf("V%d", r.n)
	key := fmt.Sprintf("k%d", keyArg%4)
	sort := int64(keyArg/4%16) - 4
	if r.cfg.windowed {
		sort = r.now()
	}
	r.logf("publish %s %s %d", tok, key, sort)
	if err := r.q.publish(sort, key, payload(tok, arg*r.cfg.pad)); err != nil {
		r.failf("publish %s: %v", tok, err)
	}
	r.m.publish(tok, key, sort, r.now())
	r.m.dirty = true
}

// pull takes up to about max values; the model says which batches.
func (r *sortedRun) pull(max int) {
	defer r.noteKilled()
	r.logf("pull %d", max)
	now := r.now()
	want := r.m.pull(max, now)
	got, err := r.q.pull(max)
	if len(want) == 0 {
		if !errors.Is(err, queue.ErrEmpty) {
			r.failf("pull: got %s, %v; the model has nothing to pull", describeBatches(got), err)
		}
		return
	}
	if err != nil {
		r.failf("pull: %v; the model pulls %s", err, r.m.describe(want))
	}
	if g, w := describeBatches(got), r.m.describe(want); g != w {
		r.failf("pull: got %s, the model pulls %s", g, w)
	}
	for i, b := range got {
		for j, v := range b.values {
			if mv := want[i].vals[j]; v.sort != mv.sort || v.at != mv.at {
				r.failf("pull: %s has sort key %d published at %d, the model %d at %d", v.tok, v.sort, v.at, mv.sort, mv.at)
			}
		}
		r.held = append(r.held, heldBatch{b: b, lease: want[i].lease, gen: r.gen})
	}
	r.m.dirty = true
}

// noteKilled notes that the records of the values a pull kept at the
// limit may be unwritten (see modelRun.noteKilled).
func (r *sortedRun) noteKilled() {
	r.unflushed = r.unflushed || r.m.killed
	r.m.killed = false
}

// describeBatches writes batches as key[token/deliveries ...] ...
func describeBatches(bs []pulledBatch) string {
	var sb strings.Builder
	for _, b := range bs {
		fmt.Fprintf(&sb, "%s[", b.key)
		for i, v := range b.values {
			if i > 0 {
				sb.WriteByte(' ')
			}
			fmt.Fprintf(&sb, "%s/%d", v.tok, v.deliveries)
		}
		sb.WriteString("] ")
	}
	return sb.String()
}

// settle acks (4), nacks (5), extends (6) or dead-letters (7) a held batch;
// the model says whether its lease still holds.
func (r *sortedRun) settle(op, which, arg int) {
	if len(r.held) == 0 {
		return
	}
	i := which % len(r.held)
	h := r.held[i]
	r.held = slices.Delete(r.held, i, i+1)
	if h.gen != r.gen && (op == 6 || op == 7) {
		r.settleStale(op, h)
		return
	}
	now := r.now()
	b, owns := r.m.owns(h.lease, now)
	var err error
	switch op {
	case 4:
		r.logf("ack %s", h.b.key)
		err = r.q.ack(h.b.lease)
		if owns {
			r.m.ack(b)
		}
	case 5:
		d := time.Duration(arg%3) * time.Second
		r.logf("nack %s %v", h.b.key, d)
		err = r.q.nack(h.b.lease, d)
		if owns {
			r.m.endLease(b, map[bool]int64{true: now + int64(d)}[d > 0])
		}
	case 6:
		d := time.Duration(1+arg%20) * time.Second
		r.logf("extend %s %v", h.b.key, d)
		err = h.b.extend(d)
		if owns {
			b.due = now + int64(d)
			r.held = append(r.held, h)
		}
	case 7:
		r.logf("dead-letter %s", h.b.key)
		err = h.b.dead("model")
		if owns {
			r.m.deadLetter(b)
		}
	}
	if owns && err != nil || !owns && !errors.Is(err, queue.ErrLeaseLost) {
		r.failf("settle %s: %v; the model says the batch holds its lease: %v", h.b.key, err, owns)
	}
	r.m.dirty = r.m.dirty || owns
}

// settleStale extends or dead-letters a batch pulled before a reopen: its
// methods are bound to the queue it came from, now closed, so they fail
// with ErrClosed and change nothing; the batch stays held (Sorted.Ack and
// Sorted.Nack settle it by lease).
func (r *sortedRun) settleStale(op int, h heldBatch) {
	r.logf("settle %d of %s on the closed queue", op, h.b.key)
	var err error
	if op == 6 {
		err = h.b.extend(time.Second)
	} else {
		err = h.b.dead("model")
	}
	if !errors.Is(err, queue.ErrClosed) {
		r.failf("settle %s on its closed queue: %v, want ErrClosed", h.b.key, err)
	}
	r.held = append(r.held, h)
}

// compact runs Compact; see modelRun.compact.
func (r *sortedRun) compact(what string) {
	r.logf("%s", what)
	before := r.q.stats().LastLSN
	if err := r.q.compact(); err != nil {
		r.failf("compact: %v", err)
	}
	r.m.dirty = r.m.dirty || r.q.stats().LastLSN != before
}

// moveClock steps the clock forward by 1 to 20 s or, with an argument
// from stepBackFrom on, back by 2 to 40 s (see modelRun.moveClock).
func (r *sortedRun) moveClock(arg int) {
	if arg >= stepBackFrom {
		r.advance(-time.Duration(2*(256-arg)) * time.Second)
		return
	}
	r.advance(time.Duration(1+arg%20) * time.Second)
}

// advance moves the clock (back, when d < 0) and returns the batches
// whose lease ran out.
func (r *sortedRun) advance(d time.Duration) {
	r.logf("advance %v", d)
	r.clock.Advance(d)
	n, err := r.q.requeue()
	if err != nil {
		r.failf("requeue expired: %v", err)
	}
	if want := r.m.expire(r.now()); n != want {
		r.failf("requeue expired: %d batches, the model has %d", n, want)
	}
	r.m.dirty = r.m.dirty || n > 0
	r.unflushed = r.unflushed || n > 0
}

// changePolicy reads the policy of the next open, when the input changes
// policies (a sorted queue refuses no ids: the window changes nothing).
func (r *sortedRun) changePolicy(in *opReader) {
	if !r.cfg.policies {
		return
	}
	p := readPolicy(in.next(), r.cfg.policy(r.m.ackTimeout))
	r.logf("%v", p)
	r.cfg.setPolicy(p)
	r.m.maxDeliver, r.m.ackTimeout = p.maxDeliver, p.ackTimeout
}

// reopen closes the queue cleanly and opens it again: leases keep running.
func (r *sortedRun) reopen() {
	r.logf("close and reopen")
	if err := r.q.close(); err != nil {
		r.failf("close: %v", err)
	}
	r.opened = false
	r.open()
	if !r.q.recovery().Clean {
		r.failf("reopen after Close: not clean")
	}
	r.m.dirty = false
}

// crash opens a copy of the directory as a kill -9 leaves it: every lease
// ends (see modelRun.crash).
func (r *sortedRun) crash() {
	if r.unflushed {
		r.compact("compact (to flush the expiries)")
		r.unflushed = false
	}
	r.logf("crash")
	img, err := crashImage(r.t, r.dir)
	if err != nil {
		r.failf("crash image: %v", err)
	}
	if _, err := queue.Verify(img, nil); err != nil {
		r.failf("verify of the crash image: %v", err)
	}
	r.q.close()
	r.opened, r.dir = false, img
	r.open()
	rec := r.q.recovery()
	if rec.Clean == r.m.dirty {
		r.failf("crash: Recovery().Clean is %v, but the crashed process appended records: %v", rec.Clean, r.m.dirty)
	}
	if want := r.m.crash(); rec.Requeued != want {
		r.failf("crash: %d batches requeued, the model has %d", rec.Requeued, want)
	}
	r.m.dirty = r.m.dirty || rec.Requeued > 0
	// Open appended the returns of the crashed leases without waiting for
	// them, as RequeueExpired does.
	r.unflushed = r.unflushed || rec.Requeued > 0
}

// stats compares the counts.
func (r *sortedRun) stats() {
	r.logf("stats")
	st := r.q.stats()
	got := fmt.Sprintf("pending=%d keys=%d batches=%d leased=%d dead=%d",
		st.SortedPending, st.SortedKeys, st.SortedBatches, st.SortedLeased, st.SortedDead)
	if want := r.m.counts(r.now()); got != want {
		r.failf("stats %s, the model has %s", got, want)
	}
}

// finish lets every lease, hold and window run out, compares the counts
// and pulls everything in the model's order.
func (r *sortedRun) finish() {
	r.advance(time.Hour)
	r.stats()
	for i := 0; i < len(r.m.vals) && len(r.m.pullable(r.now(), false)) > 0; i++ {
		r.pull(1)
	}
	r.pull(1)
	r.stats() // the pulls dead-letter the values past the limit
	r.checkDead()
}

// checkDead compares the dead values in publish order, their delivery
// counts and the reasons the docs name.
func (r *sortedRun) checkDead() {
	got, err := r.q.dead()
	if err != nil {
		r.failf("dead values: %v", err)
	}
	want := r.m.deadVals()
	if len(got) != len(want) {
		r.failf("%d dead values, the model has %d", len(got), len(want))
	}
	for i, g := range got {
		w := want[i]
		if g.tok != w.tok || g.deliveries != w.deliveries || w.reason != "" && g.reason != w.reason {
			r.failf("dead value %s: %d deliveries, reason %q; the model has %s, %d, %q",
				g.tok, g.deliveries, g.reason, w.tok, w.deliveries, w.reason)
		}
	}
}

// sortedModel is a simple in-memory sorted queue with the semantics
// queue/sorted.go and the README's "Sorted and windowed queues" document:
//
//   - a key's place in the pull order is the smallest sort key among its
//     pending values (ties: the key's name); a pull takes whole keys in
//     that order, each with all its pending values in sort-key order
//     (ties: publish order), until it has max values or more;
//   - windowed: a key is pullable once its smallest pending sort key (the
//     publish time) is at least the window old, judged by the clock at
//     each pull: a step back holds again a key whose window had closed
//     and that was not pulled since;
//   - a pulled batch is leased until now + AckTimeout; each of its values
//     counts a delivery;
//   - ack removes the batch's values; nack, an expired lease or a crash
//     puts them back at their sort keys, or in the dead set once they have
//     had MaxDeliveries; a nack with a delay keeps the key from being
//     pulled while the clock is before the delay's end (a key nacked
//     again keeps the later end), judged at each pull and Stats (a step
//     back holds the key again), until the key is pulled or has no
//     pending value left; dead-letter moves them all to the dead set;
//   - a lease's deadline is a time of the clock: a step back lengthens it
//     by the step;
//   - with single flight a key with a leased batch is not pullable;
//   - the pending values that have had MaxDeliveries (left pending by an
//     open with a higher limit or none) of the key a pull would take next
//     go to the dead set, and the pull looks at the keys again;
//   - a clean close keeps leases running; a crash ends them, unless the
//     crashed process appended nothing;
//   - an open may change MaxDeliveries and AckTimeout: the limit that
//     applies is the open's own, a lease keeps the deadline it was given.
type sortedModel struct {
	vals       map[string]*sortedVal // live values (dead included) by token
	batches    map[int]*sortedBatch  // leased batches by lease
	holds      map[string]int64      // key -> end of its nack delay (unix ns)
	seq        int                   // publishes so far
	leases     int                   // pulls so far: names a batch
	maxDeliver int                   // MaxDeliveries; no limit when <= 0
	ackTimeout time.Duration
	single     bool  // SingleFlight
	window     int64 // the windowed form's window (ns); 0: Sorted
	dirty      bool  // the log does not end with a clean close
	killed     bool  // a pull dead-lettered values at the limit: records that it may not have waited for
}

// sortedState is where a model value stands.
type sortedState uint8

const (
	sortedPending sortedState = iota
	sortedLeased
	sortedDead
)

type sortedVal struct {
	tok, key   string
	sort, at   int64 // sort key; publish time (unix ns)
	seq        int   // publish order
	state      sortedState
	deliveries int
	reason     string // dead: the reason the docs name, or "" where they name none
}

type sortedBatch struct {
	lease int
	key   string
	due   int64        // lease deadline (unix ns)
	vals  []*sortedVal // in pull order
}

func newSortedModel(maxDeliver int, ackTimeout time.Duration, single bool) *sortedModel {
	return &sortedModel{vals: make(map[string]*sortedVal), batches: make(map[int]*sortedBatch),
		holds: make(map[string]int64), maxDeliver: maxDeliver, ackTimeout: ackTimeout, single: single, dirty: true}
}

func (m *sortedModel) publish(tok, key string, sort, now int64) {
	m.seq++
	m.vals[tok] = &sortedVal{tok: tok, key: key, sort: sort, at: now, seq: m.seq}
}

// pending returns key's pending values in sort-key order.
func (m *sortedModel) pending(key string) []*sortedVal {
	var out []*sortedVal
	for _, v := range m.vals {
		if v.key == key && v.state == sortedPending {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b *sortedVal) int {
		if a.sort != b.sort {
			return cmpInt(a.sort, b.sort)
		}
		return a.seq - b.seq
	})
	return out
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// inflight reports whether key has a leased batch.
func (m *sortedModel) inflight(key string) bool {
	for _, b := range m.batches {
		if b.key == key {
			return true
		}
	}
	return false
}

// pullable returns the keys in pull order that are neither held by a nack
// delay nor, under single flight, leased; with window, only those whose
// window has closed.
func (m *sortedModel) pullable(now int64, window bool) []string {
	first := map[string]int64{}
	for _, v := range m.vals {
		if v.state != sortedPending {
			continue
		}
		if s, ok := first[v.key]; !ok || v.sort < s {
			first[v.key] = v.sort
		}
	}
	var keys []string
	for k, s := range first {
		switch {
		case m.holds[k] > now, m.single && m.inflight(k), window && m.window > 0 && s > now-m.window:
			continue
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmpInt(first[a], first[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return keys
}

// pull leases whole keys in order until max values are taken.
func (m *sortedModel) pull(max int, now int64) []*sortedBatch {
	var out []*sortedBatch
	for n := 0; n < max; {
		keys := m.pullable(now, true)
		if len(keys) == 0 {
			break
		}
		if m.killPastLimit(keys[0]) {
			continue // the key's place may have moved, or it has no value left
		}
		m.leases++
		delete(m.holds, keys[0]) // a pull ends the key's hold
		b := &sortedBatch{lease: m.leases, key: keys[0], due: now + int64(m.ackTimeout), vals: m.pending(keys[0])}
		for _, v := range b.vals {
			v.state = sortedLeased
			v.deliveries++
		}
		m.batches[b.lease] = b
		out, n = append(out, b), n+len(b.vals)
	}
	return out
}

// killPastLimit moves key's pending values that have had MaxDeliveries
// to the dead set and reports whether there were any.
func (m *sortedModel) killPastLimit(key string) bool {
	killed := false
	for _, v := range m.pending(key) {
		if m.pastLimit(v.deliveries) {
			v.state, killed, m.dirty, m.killed = sortedDead, true, true, true // a record dead-letters it
			v.reason = fmt.Sprintf("%d deliveries, limit %d; not delivered again", v.deliveries, m.maxDeliver)
		}
	}
	if len(m.pending(key)) == 0 {
		delete(m.holds, key) // a key left without pending values loses its hold
	}
	return killed
}

// pastLimit reports whether a value delivered n times has had every
// delivery MaxDeliveries allows.
func (m *sortedModel) pastLimit(n int) bool { return m.maxDeliver > 0 && n >= m.maxDeliver }

// describe writes batches as describeBatches does.
func (m *sortedModel) describe(bs []*sortedBatch) string {
	var sb strings.Builder
	for _, b := range bs {
		fmt.Fprintf(&sb, "%s[", b.key)
		for i, v := range b.vals {
			if i > 0 {
				sb.WriteByte(' ')
			}
			fmt.Fprintf(&sb, "%s/%d", v.tok, v.deliveries)
		}
		sb.WriteString("] ")
	}
	return sb.String()
}

// owns returns the batch leased as lease, if its deadline is after now.
func (m *sortedModel) owns(lease int, now int64) (*sortedBatch, bool) {
	b, ok := m.batches[lease]
	return b, ok && now < b.due
}

func (m *sortedModel) ack(b *sortedBatch) {
	delete(m.batches, b.lease)
	for _, v := range b.vals {
		delete(m.vals, v.tok)
	}
}

// endLease puts the batch's values back, or in the dead set once they had
// MaxDeliveries; hold > 0 keeps the key from being pulled until then, if
// a value was put back.
func (m *sortedModel) endLease(b *sortedBatch, hold int64) {
	delete(m.batches, b.lease)
	back := false
	for _, v := range b.vals {
		v.state, v.reason = sortedPending, ""
		if m.pastLimit(v.deliveries) {
			v.state = sortedDead
			continue
		}
		back = true
	}
	if hold > 0 && back {
		m.holds[b.key] = max(m.holds[b.key], hold) // a key keeps its latest hold
	}
}

func (m *sortedModel) deadLetter(b *sortedBatch) {
	delete(m.batches, b.lease)
	for _, v := range b.vals {
		v.state, v.reason = sortedDead, "model"
	}
}

// deadVals returns the dead values in publish order.
func (m *sortedModel) deadVals() []*sortedVal {
	var out []*sortedVal
	for _, v := range m.vals {
		if v.state == sortedDead {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b *sortedVal) int { return a.seq - b.seq })
	return out
}

// expire ends the leases whose deadline is at or before now and returns
// how many.
func (m *sortedModel) expire(now int64) int {
	n := 0
	for _, b := range m.batches {
		if b.due <= now {
			m.endLease(b, 0)
			n++
		}
	}
	return n
}

// crash ends every lease, unless the crashed process appended nothing,
// and returns how many.
func (m *sortedModel) crash() int {
	if !m.dirty {
		return 0
	}
	return m.expire(1<<63 - 1)
}

// counts returns pending values, keys that can be pulled now or when
// their window closes, leased batches and their values, dead values.
func (m *sortedModel) counts(now int64) string {
	var c [3]int
	for _, v := range m.vals {
		c[v.state]++
	}
	return fmt.Sprintf("pending=%d keys=%d batches=%d leased=%d dead=%d",
		c[sortedPending], len(m.pullable(now, false)), len(m.batches), c[sortedLeased], c[sortedDead])
}

// TestCompactBesideHousekeeper runs, many times, a FuzzSortedModel input
// whose explicit Compact copies dead values forward and so wakes the
// housekeeper, which compacts too: its truncation cut the log under the
// first compaction's reading of the cursor region, and Compact failed with
// "read cursor region: record not in log" although nothing live was there
// (queue/move.go readCandidates). The interleaving is the scheduler's; on
// the old code about one run in twenty failed.
func TestCompactBesideHousekeeper(t *testing.T) {
	in := []byte("\x00\x01A%$\x01#1\x10\x03\x00\x04\xff\x00\x001\xfa1\x00\x11\xfa\x03\x00\x04\xffB\x00\x11\xfa*" +
		"\x00\x04\xff1\x00\x11\xfa\x03X\x04\xff+\x00Ay\x03\x00\x04\xff\x00c\"\v")
	for i := 0; i < scaled(200, 4); i++ {
		ops := &opReader{b: in}
		r := newSortedRun(t, readSortedConfig(ops))
		for !ops.done() {
			r.step(ops)
		}
		r.finish()
		r.close()
	}
}
