package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/walq/walq/internal/fakeclock"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walq/walq/queue"
	"github.com/walq/walq/recovery"
	"github.com/walq/walq/wal"
)

// The go test -fuzz targets. Each has a seed corpus under
// testdata/fuzz/<target>/ and runs its seeds in a plain go test. Short runs
// (CI) and long runs: see README.md.

// FuzzQueueModel decodes the input as a header that chooses the queue's
// options (modelConfig: segment size, snapshot threshold, sync mode,
// MaxDeliveries, DedupWindow, payload sizes), then a sequence of operations
// (enqueue, delayed, with a producer id, duplicate, batch, dequeue, batch
// dequeue, ack, nack, extend, dead-letter, clock advance and expiry, clock
// step back, requeue and purge of the dead, compaction, stats, clean close
// and reopen, crash-image reopen) and runs it on a real queue and on the in-memory
// model (model_test.go): every delivery (which message, its delivery
// count), every outcome (nil, ErrLeaseLost, ErrDuplicate, ErrEmpty), the
// counts and, at the end, the dead letters and a full drain must agree.
// Small segments and snapshot thresholds make the log roll over, the
// housekeeper compact in the background and old messages be copied
// forward while the operations run.
//
//	go test ./fuzz -run '^$' -fuzz '^FuzzQueueModel$' -fuzztime 30s
func FuzzQueueModel(f *testing.F) {
	fuzzModel(f, modelSeeds, func(t *testing.T, in *opReader) *modelRun { return newModelRun(t, readModelConfig(in)) })
}

// modelSeeds are hand-written inputs: the six header bytes (see hdr; all
// zero is the first choice of each option), then one operation code per
// byte (see modelRun.step) with its arguments after it.
var modelSeeds = [][]byte{
	hdr(0, 0, 0, 0, 0, 0, 0, 9, 0, 9, 5, 5, 7, 0, 7, 0),
	hdr(0, 0, 0, 0, 0, 0, 1, 2, 0, 11, 3, 5, 5, 8, 0, 2, 5, 10, 0, 12),
	hdr(0, 0, 0, 0, 0, 0, 2, 2, 3, 0, 4, 3, 6, 4, 7, 0, 14, 7, 0, 5),
	hdr(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 5, 15, 5, 5, 7, 0, 7, 1, 16, 11, 30, 5),
	hdr(0, 0, 0, 0, 0, 0, 0, 5, 8, 0, 0, 5, 8, 0, 0, 5, 8, 0, 0, 5, 12, 16, 5, 7, 0),
	hdr(0, 0, 0, 0, 0, 0, 4, 5, 6, 9, 9, 0, 40, 11, 20, 6, 9, 13, 15, 6, 9, 16),
	hdr(0, 0, 0, 0, 0, 0, 1, 1, 1, 3, 11, 2, 5, 5, 14, 5, 7, 0, 15, 7, 0, 16),
	// 4 KiB segments, 4 KiB payloads, a manual snapshot threshold: an old
	// delayed message pins the log while others churn, then Compact copies it
	// forward; a crash and a reopen follow.
	hdr(1, 0, 0, 0, 0, 2, slices.Concat([]byte{1, 200, 0, 200, 5}, churn(12, 250), []byte{13, 15, 16, 5, 7, 0, 14, 16})...),
	// The same under SyncAlways with a small snapshot threshold: the
	// housekeeper compacts and copies forward by itself.
	hdr(1, 1, 1, 0, 0, 2, slices.Concat([]byte{0, 200, 1, 3, 2, 4, 5}, churn(16, 250), []byte{15, 5, 7, 0, 16, 13, 14})...),
	// SyncInterval, one delivery, a dedup window: ids refused after their
	// ack until the window passes; dead letters requeued; a crash.
	hdr(2, 2, 2, 1, 1, 1, slices.Concat([]byte{2, 1, 5, 7, 0, 0, 2, 0, 11, 5, 2, 0, 0, 0, 6, 2, 8, 0, 1, 16, 12, 5, 15, 16}, churn(8, 100), []byte{11, 19, 3, 2, 0, 16})...),
	// No delivery limit, dedup window of a minute, 8 KiB segments,
	// nacks and expiries across a reopen and a crash.
	hdr(3, 2, 1, 4, 2, 1, slices.Concat([]byte{2, 9, 2, 8, 0, 100, 5, 5, 8, 0, 0, 11, 40, 5, 14, 5, 9, 0, 5}, churn(10, 180), []byte{15, 16, 13, 5, 7, 1, 2, 0, 16})...),
	// The inputs below change the policy at each reopen (policyFlag; the
	// byte after a reopen or crash is the policy, see readPolicy).
	// A limit of 5 lowered to 2: a message nacked three times is
	// dead-lettered by the next delivery, which takes the next message; a
	// crash under the walq tool's open (no limit) makes the next one
	// ready, a crash under a limit of 1 dead-letters it; both stay dead.
	hdr(policyFlag, 0, 0, 3, 0, 0, 0, 0, 0, 0, 5, 8, 0, 0, 5, 8, 0, 0, 5, 8, 0, 0, 16, 14, 2, 16, 5, 16,
		15, 128, 5, 8, 0, 0, 5, 15, 1, 16, 14, 3, 5, 16),
	// A limit of 1 raised to none: a lease from before the reopen runs
	// out and the message is delivered again; lowered to 1, its next
	// delivery dead-letters it; raised to 5, it is requeued and acked.
	hdr(policyFlag, 0, 0, 1, 0, 0, 0, 0, 5, 8, 0, 0, 16, 12, 5, 14, 4, 11, 10, 5, 8, 1, 0, 14, 1, 16, 5, 16,
		14, 3, 12, 5, 7, 1, 0, 16),
	// Dedup windows: an id acked under a minute is refused after a reopen
	// with a minute, free once a 5 s window has passed, either after a
	// 5 s window then a minute, free under a window of 0.
	hdr(policyFlag, 0, 0, 0, 2, 0, 2, 1, 5, 7, 0, 0, 14, 10, 11, 9, 2, 0, 14, 5, 11, 0, 2, 0, 5, 7, 0, 0,
		14, 10, 11, 9, 2, 0, 14, 128, 2, 1, 5, 7, 0, 0, 11, 19, 2, 0, 15, 0, 2, 0, 16),
	// AckTimeout shortened to 2 s: a lease from before keeps its 10 s, a
	// lease after runs out in 2 s; sync modes switched at crashes.
	hdr(policyFlag, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 14, 15, 5, 11, 2, 16, 14, 45, 5, 15, 90, 16, 6, 3,
		11, 0, 13, 15, 47, 16),
	// 4 KiB segments and snapshots, ids acked under a minute's window,
	// churn, then a crash into a window of 0 and a reopen with a minute.
	hdr(policyFlag|1, 1, 1, 0, 2, 1, slices.Concat([]byte{2, 1, 2, 3, 5, 5, 7, 0, 0, 7, 0, 0}, churn(10, 100),
		[]byte{15, 0, 2, 0, 2, 0, 16, 14, 10, 2, 1, 5, 7, 0, 0, 14, 0, 2, 0, 16})...),
	// An id acked under a minute, a reopen without a window that enqueues
	// nothing: its close snapshot forgets the id, so a reopen with a minute
	// takes it; acked again, it is refused. A no-window open acks it and
	// crashes into a minute: either answer, but a refusal holds for the
	// open, until the minute has passed.
	hdr(policyFlag, 0, 0, 0, 2, 0, 2, 1, 5, 7, 0, 0, 14, 0, 16, 14, 10, 2, 0, 5, 7, 0, 0, 2, 0, 16,
		14, 0, 2, 0, 5, 7, 0, 0, 15, 10, 2, 0, 2, 0, 11, 19, 11, 19, 2, 0, 11, 19, 11, 3, 2, 0, 16),
	// A step back of the clock (11, 254: 4 s) holds again a delayed message
	// that came due and was not delivered: the next delivery takes a later
	// message, the counts say delayed, a compaction and a crash keep it
	// held until its time comes by the clock. An id acked under a 5 s
	// window, forgotten by an enqueue after the window passed, is not
	// brought back by a step back into the window.
	hdr(0, 0, 0, 0, 1, 0, 1, 0, 0, 3, 11, 1, 16, 11, 254, 16, 5, 13, 15, 16, 5, 11, 3, 5, 2, 1, 5,
		7, 3, 0, 11, 5, 2, 1, 11, 254, 2, 0, 16),
}

// hdr returns a model input: the six header bytes (segment, snapshot,
// sync, deliveries, dedup, pad; see readModelConfig), then ops.
func hdr(seg, snap, sync, deliveries, dedup, pad byte, ops ...byte) []byte {
	return append([]byte{seg, snap, sync, deliveries, dedup, pad}, ops...)
}

// churn returns n rounds of enqueue (payload arg), dequeue and ack of a
// held delivery (the last one while two are held): records that the log
// accumulates and a compaction could drop, were it not for older messages.
func churn(n int, arg byte) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		b = append(b, 0, arg, 5, 7, 255, 0)
	}
	return b
}

// modelConfig is what a model input's header chooses.
type modelConfig struct {
	segment    int64          // Options.SegmentSize
	snapshot   int64          // Options.SnapshotBytes
	sync       queue.SyncMode // Options.Sync
	maxDeliver int            // Options.MaxDeliveries; negative: no limit
	dedup      time.Duration  // Options.DedupWindow
	pad        int            // payload bytes per unit of an operation's size argument
	policies   bool           // each reopen reads a policy byte (policyFlag)
}

// The options a header byte chooses from (the byte modulo the length);
// the first of each is the value of the fuzzer's first version, so an
// all-zero header runs the operations as it did.
var (
	segmentChoices  = []int64{64 << 10, 4096, 8192, 16 << 10}
	snapshotChoices = []int64{1 << 30, 4096, 32 << 10}
	syncChoices     = []queue.SyncMode{queue.SyncNever, queue.SyncAlways, queue.SyncInterval}
	deliverChoices  = []int{3, 1, 2, 5, -1}
	dedupChoices    = []time.Duration{0, 5 * time.Second, time.Minute}
	padChoices      = []int{1, 4, 16}
)

func choose[T any](in *opReader, choices []T) T { return choices[in.next()%len(choices)] }

// readModelConfig reads the header of a FuzzQueueModel input.
func readModelConfig(in *opReader) modelConfig {
	seg := in.next()
	return modelConfig{
		segment: segmentChoices[seg%len(segmentChoices)], policies: seg&policyFlag != 0,
		snapshot: choose(in, snapshotChoices),
		sync:     choose(in, syncChoices), maxDeliver: choose(in, deliverChoices),
		dedup: choose(in, dedupChoices), pad: choose(in, padChoices),
	}
}

// policy returns the config's policy, with the AckTimeout ackTimeout.
func (c modelConfig) policy(ackTimeout time.Duration) policy {
	return policy{maxDeliver: c.maxDeliver, dedup: c.dedup, ackTimeout: ackTimeout, sync: c.sync}
}

// setPolicy makes the config's options those of p.
func (c *modelConfig) setPolicy(p policy) {
	c.maxDeliver, c.dedup, c.sync = p.maxDeliver, p.dedup, p.sync
}

// options returns the queue options of the config: a manual clock, manual
// requeue (the model says when leases run out) and, under SyncInterval, a
// period short enough for the syncer to run between operations.
func (c modelConfig) options(clock queue.Clock, ackTimeout time.Duration) queue.Options {
	return queue.Options{Clock: clock, ManualRequeue: true, MaxDeliveries: c.maxDeliver,
		AckTimeout: ackTimeout, SegmentSize: c.segment, SnapshotBytes: c.snapshot, Sync: c.sync,
		SyncInterval: time.Millisecond, DedupWindow: c.dedup}
}

// opReader hands out the bytes of a fuzz input; 0 once it is used up.
type opReader struct {
	b []byte
	i int
}

func (r *opReader) done() bool { return r.i >= len(r.b) }

func (r *opReader) next() int {
	if r.done() {
		return 0
	}
	r.i++
	return int(r.b[r.i-1])
}

// modelRun is one FuzzQueueModel input being run.
type modelRun struct {
	t     *testing.T
	cfg   modelConfig
	dir   string
	clock *fakeclock.Clock
	q     *queue.Queue
	m     *model
	held  []heldMsg // deliveries the test holds
	freed []string  // producer ids of messages that are gone: free again
	gen   int       // opens so far
	deads int       // dead-letter operations so far: picks the next one's kind
	n     int       // tokens made
	log   []string  // operations so far, for failure messages

	// unflushed: RequeueExpired appended records and returned without
	// waiting for them (the lease that next delivers the message waits);
	// a crash copy must not race with their write.
	unflushed bool
}

// heldMsg is a delivery: the token, its model lease and its receipt.
type heldMsg struct {
	tok   string
	lease int
	r     queue.Receipt
	m     *queue.Message // the delivery; its methods reach the queue it came from
	gen   int            // modelRun.gen when it was delivered
}

func newModelRun(t *testing.T, cfg modelConfig) *modelRun {
	r := &modelRun{t: t, cfg: cfg, dir: scratchDir(t), clock: newManualClock(),
		m: newModel(cfg.maxDeliver, 10*time.Second, cfg.dedup)}
	r.open()
	return r
}

func (r *modelRun) open() {
	o := r.cfg.options(r.clock, r.m.ackTimeout)
	q, err := queue.Open(r.dir, &o)
	if err != nil {
		r.failf("open: %v", err)
	}
	r.q = q
	r.gen++
}

func (r *modelRun) close() {
	if r.q != nil {
		r.q.Close()
	}
}

func (r *modelRun) failf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("after %s: %s", strings.Join(r.log, ", "), fmt.Sprintf(format, args...))
}

func (r *modelRun) now() int64 { return r.clock.Now().UnixNano() }

// step runs one operation.
func (r *modelRun) step(in *opReader) {
	op := in.next() % 17
	switch op {
	case 0, 1, 2:
		r.enqueue(op, in.next())
	case 3:
		r.duplicate()
	case 4:
		r.batch(2 + in.next()%4)
	case 5:
		r.dequeue()
	case 6:
		r.dequeueBatch(1 + in.next()%5)
	case 7, 8, 9, 10:
		r.settle(op, in.next(), in.next())
	case 11:
		r.moveClock(in.next())
	case 12:
		r.deadOp()
	case 13:
		r.compact("compact")
	case 14:
		window := r.m.dedup // the closing open's
		r.changePolicy(in)
		r.reopen(window)
	case 15:
		r.changePolicy(in)
		r.crash()
	case 16:
		r.stats()
	}
}

func (r *modelRun) logf(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf(format, args...))
}

// enqueue adds one message: plain (0), delayed (1) or with a producer id
// (2), which may be the freed id of a message that is gone.
func (r *modelRun) enqueue(kind, arg int) {
	r.n++
	tok := fmt.Sprintf("M%d", r.n)
	var opts []queue.EnqueueOption
	var id string
	var due int64
	switch kind {
	case 1:
		d := time.Duration(1+arg%5) * time.Second
		due = r.now() + int64(d)
		opts = append(opts, queue.WithDelay(d))
	case 2:
		id = "id-" + tok
		if len(r.freed) > 0 && arg%2 == 0 {
			id, r.freed = r.freed[0], r.freed[1:]
		}
		opts = append(opts, queue.WithID(id))
	}
	r.logf("enqueue %s %d %q", tok, kind, id)
	_, err := r.q.Enqueue(context.Background(), payload(tok, arg*r.cfg.pad), opts...)
	taken, sure := false, true
	if id != "" {
		taken, sure = r.m.idTaken(id, r.now())
	}
	if !sure && errors.Is(err, queue.ErrDuplicate) {
		taken = true // an open since the ack had a shorter window: forgetting the id or not are both right
		r.m.pin(id)
	}
	if taken {
		if !errors.Is(err, queue.ErrDuplicate) {
			r.failf("enqueue %s with id %s, acked within the dedup window: %v, want ErrDuplicate", tok, id, err)
		}
		r.freed = append(r.freed, id) // free again once the window has passed
		return
	}
	if err != nil {
		r.failf("enqueue %s: %v", tok, err)
	}
	r.m.enqueue(tok, id, due)
	r.m.dirty = true
}

// duplicate enqueues with the id of a live message: ErrDuplicate.
func (r *modelRun) duplicate() {
	for _, msg := range r.m.msgs {
		if msg.id == "" {
			continue
		}
		r.logf("duplicate %s", msg.id)
		if _, err := r.q.Enqueue(context.Background(), []byte("dup|"), queue.WithID(msg.id)); !errors.Is(err, queue.ErrDuplicate) {
			r.failf("enqueue of the live id %s: %v, want ErrDuplicate", msg.id, err)
		}
		return
	}
}

func (r *modelRun) batch(n int) {
	items := make([]queue.Item, n)
	toks := make([]string, n)
	for i := range items {
		r.n++
		toks[i] = fmt.Sprintf("M%d", r.n)
		items[i] = queue.Item{Payload: payload(toks[i], i*r.cfg.pad)}
	}
	r.logf("batch %v", toks)
	if _, err := r.q.EnqueueBatch(context.Background(), items); err != nil {
		r.failf("batch: %v", err)
	}
	for _, tok := range toks {
		r.m.enqueue(tok, "", 0)
	}
	r.m.dirty = true
}

// dequeue takes one message; the model says which, or that none is ready.
func (r *modelRun) dequeue() {
	defer r.noteKilled()
	r.logf("dequeue")
	want := r.m.next(r.now())
	m, err := r.q.TryDequeue()
	if want == nil {
		if !errors.Is(err, queue.ErrEmpty) {
			r.failf("dequeue: got %v, %v; the model has nothing ready", describeMsg(m), err)
		}
		return
	}
	if err != nil {
		r.failf("dequeue: %v; the model delivers %s", err, want.tok)
	}
	r.delivered(m, want)
}

// noteKilled notes that the dead-letter records of the messages a
// delivery kept at the limit may be unwritten: a delivery that returns
// nothing (ErrEmpty) does not wait for them, as RequeueExpired does not
// wait for its records, so a crash copy waits for them first.
func (r *modelRun) noteKilled() {
	r.unflushed = r.unflushed || r.m.killed
	r.m.killed = false
}

// dequeueBatch takes up to max messages (only when the model has one
// ready: DequeueBatch blocks otherwise).
func (r *modelRun) dequeueBatch(max int) {
	now := r.now()
	if r.m.next(now) == nil {
		r.dequeue()
		return
	}
	defer r.noteKilled()
	r.logf("dequeue batch %d", max)
	ms, err := r.q.DequeueBatch(context.Background(), max)
	if err != nil {
		r.failf("dequeue batch: %v", err)
	}
	for _, m := range ms {
		want := r.m.next(now)
		if want == nil {
			r.failf("dequeue batch: got %s, the model has nothing more ready", describeMsg(m))
		}
		r.delivered(m, want)
	}
	if len(ms) < max && r.m.next(now) != nil {
		r.failf("dequeue batch of %d returned %d, the model has %s ready too", max, len(ms), r.m.next(now).tok)
	}
}

// delivered checks a delivery against the model's and holds it.
func (r *modelRun) delivered(m *queue.Message, want *modelMsg) {
	if tok := tokenOf(m.Payload); tok != want.tok || m.Deliveries != want.deliveries+1 {
		r.failf("delivered %s, the model delivers %s (delivery %d)", describeMsg(m), want.tok, want.deliveries+1)
	}
	lease := r.m.deliver(want, r.now())
	r.m.dirty = true
	r.held = append(r.held, heldMsg{tok: want.tok, lease: lease, r: m.Receipt, m: m, gen: r.gen})
}

func describeMsg(m *queue.Message) string {
	if m == nil {
		return "nothing"
	}
	return fmt.Sprintf("%s (delivery %d)", tokenOf(m.Payload), m.Deliveries)
}

// settle acks (7), nacks (8), extends (9) or dead-letters (10) a held
// delivery; the model says whether it still owns its message. A delivery
// of the queue still open is settled with its Message's methods, one from
// before a reopen with its receipt on the queue open now.
func (r *modelRun) settle(op, which, arg int) {
	if len(r.held) == 0 {
		return
	}
	i := which % len(r.held)
	h := r.held[i]
	r.held = slices.Delete(r.held, i, i+1)
	msg, owns := r.m.owns(h.tok, h.lease)
	now := r.now()
	own := h.gen == r.gen
	var err error
	switch op {
	case 7:
		r.logf("ack %s", h.tok)
		if own {
			err = h.m.Ack()
		} else {
			err = r.q.Ack(h.r)
		}
		if owns {
			r.m.ack(msg, now)
			if msg.id != "" {
				r.freed = append(r.freed, msg.id)
			}
		}
	case 8:
		d := time.Duration(arg%3) * time.Second
		r.logf("nack %s %v", h.tok, d)
		if own {
			err = h.m.Nack(d)
		} else {
			err = r.q.Nack(h.r, d)
		}
		if owns {
			r.m.endLease(msg, map[bool]int64{true: now + int64(d)}[d > 0])
		}
	case 9:
		d := time.Duration(1+arg%20) * time.Second
		r.logf("extend %s %v", h.tok, d)
		if own {
			err = h.m.Extend(d)
		} else {
			err = r.q.Extend(h.r, d)
		}
		if owns {
			msg.due = now + int64(d)
			r.held = append(r.held, h)
		}
	case 10:
		r.logf("dead-letter %s", h.tok)
		if own {
			err = h.m.DeadLetter("model")
		} else {
			err = r.q.DeadLetter(h.r, "model")
		}
		if owns {
			msg.state, msg.due, msg.reason = modelDead, 0, "model"
		}
	}
	if owns && err != nil || !owns && !errors.Is(err, queue.ErrLeaseLost) {
		r.failf("settle %s: %v; the model says the delivery owns its message: %v", h.tok, err, owns)
	}
	r.m.dirty = r.m.dirty || owns
}

// compact runs Compact. Messages it copies forward are records appended:
// the log no longer ends with a clean close even if nothing else was.
func (r *modelRun) compact(what string) {
	r.logf("%s", what)
	before := r.q.Stats().LastLSN
	if err := r.q.Compact(); err != nil {
		r.failf("compact: %v", err)
	}
	r.m.dirty = r.m.dirty || r.q.Stats().LastLSN != before
}

// stepBackFrom is the first argument of a clock operation that steps the
// clock back (by 2 s per unit below 256: 2 to 40 s) rather than forward
// (by 1 to 20 s), as a wall clock set by hand or by NTP steps.
const stepBackFrom = 236

// moveClock steps the clock forward or back, as arg says.
func (r *modelRun) moveClock(arg int) {
	if arg >= stepBackFrom {
		r.advance(-time.Duration(2*(256-arg)) * time.Second)
		return
	}
	r.advance(time.Duration(1+arg%20) * time.Second)
}

// advance moves the clock (back, when d < 0) and ends the leases that ran
// out.
func (r *modelRun) advance(d time.Duration) {
	r.logf("advance %v", d)
	r.clock.Advance(d)
	n, err := r.q.RequeueExpired()
	if err != nil {
		r.failf("requeue expired: %v", err)
	}
	r.m.expire(r.now())
	r.m.lapse(r.now())
	r.m.dirty = r.m.dirty || n > 0
	r.unflushed = r.unflushed || n > 0
}

// deadOp changes the dead letters, in turn: requeue all, requeue the
// oldest by id, purge the oldest by id, purge all.
func (r *modelRun) deadOp() {
	r.deads++
	switch r.deads % 4 {
	case 1:
		r.requeueDead()
	case 2, 3:
		r.changeOldestDead(r.deads%4 == 2)
	case 0:
		r.logf("purge dead")
		n, err := r.q.PurgeAllDead()
		dead := r.m.deadTokens()
		if err != nil || n != len(dead) {
			r.failf("purge dead: %d, %v; the model has %d", n, err, len(dead))
		}
		for _, tok := range dead {
			r.purged(r.m.msgs[tok])
		}
	}
}

func (r *modelRun) requeueDead() {
	r.logf("requeue dead")
	n, err := r.q.RequeueAllDead()
	if want := r.m.requeueDead(); err != nil || n != want {
		r.failf("requeue dead: %d, %v; the model has %d", n, err, want)
	}
	r.m.dirty = r.m.dirty || n > 0
}

// changeOldestDead requeues (or purges) the oldest dead letter by its id;
// with none, an unknown id fails with ErrNotFound.
func (r *modelRun) changeOldestDead(requeue bool) {
	change := map[bool]func(string) error{true: r.q.RequeueDead, false: r.q.PurgeDead}[requeue]
	dead := r.m.deadTokens()
	if len(dead) == 0 {
		r.logf("requeue or purge of an unknown dead letter")
		if err := change("no-such-id"); !errors.Is(err, queue.ErrNotFound) {
			r.failf("requeue or purge of an unknown dead letter: %v, want ErrNotFound", err)
		}
		return
	}
	dl, err := r.q.DeadLetters(0, 1)
	if err != nil || len(dl) != 1 || tokenOf(dl[0].Payload) != dead[0] {
		r.failf("oldest dead letter: %v, %v; the model has %s", dl, err, dead[0])
	}
	r.logf("requeue %v or purge dead %s", requeue, dead[0])
	if err := change(dl[0].ID); err != nil {
		r.failf("requeue %v or purge dead %s: %v", requeue, dead[0], err)
	}
	msg := r.m.msgs[dead[0]]
	if requeue {
		msg.state, msg.deliveries = modelReady, 0
	} else {
		r.purged(msg)
	}
	r.m.dirty = true
}

// purged removes a purged dead letter from the model: as an ack, its
// producer id (if any) enters the dedup window.
func (r *modelRun) purged(msg *modelMsg) {
	r.m.ack(msg, r.now())
	if msg.id != "" {
		r.freed = append(r.freed, msg.id)
	}
	r.m.dirty = true
}

// changePolicy reads the policy of the next open, when the input changes
// policies.
func (r *modelRun) changePolicy(in *opReader) {
	if !r.cfg.policies {
		return
	}
	p := readPolicy(in.next(), r.cfg.policy(r.m.ackTimeout))
	r.logf("%v", p)
	r.cfg.setPolicy(p)
	r.m.change(p, r.now())
}

// reopen closes the queue cleanly and opens it again: leases keep running,
// receipts stay valid. window is the dedup window of the open it closes.
func (r *modelRun) reopen(window time.Duration) {
	r.logf("close and reopen")
	if err := r.q.Close(); err != nil {
		r.failf("close: %v", err)
	}
	r.q = nil
	r.open()
	if !r.q.Recovery().Clean {
		r.failf("reopen after Close: not clean")
	}
	r.m.dirty = false
	r.m.reopened(window)
}

// crash copies the directory as a kill -9 leaves it and opens the copy:
// every lease ends. The expiries RequeueExpired appended without waiting
// are flushed first: a process killed before they were written would have
// returned from nothing that depends on them, but the model counts them.
func (r *modelRun) crash() {
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
	r.q.Close()
	r.q, r.dir = nil, img
	r.open()
	if r.q.Recovery().Clean == r.m.dirty {
		r.failf("crash: Recovery().Clean is %v, but the crashed process appended records: %v", r.q.Recovery().Clean, r.m.dirty)
	}
	r.m.crash()
	r.m.dirty = r.m.dirty || r.q.Recovery().Requeued > 0
	// Open appended the returns of the crashed leases without waiting for
	// them, as RequeueExpired does.
	r.unflushed = r.unflushed || r.q.Recovery().Requeued > 0
}

// stats compares the counts.
func (r *modelRun) stats() {
	r.logf("stats")
	st := r.q.Stats()
	got := fmt.Sprintf("ready=%d delayed=%d inflight=%d dead=%d", st.Ready, st.Delayed, st.InFlight, st.Dead)
	if want := r.m.counts(r.now()); got != want {
		r.failf("stats %s, the model has %s", got, want)
	}
}

// finish lets every lease and delay run out, then compares the dead
// letters and drains the queue in the model's order.
func (r *modelRun) finish() {
	r.advance(time.Hour)
	r.stats()
	r.checkDead()
	for i := 0; i <= len(r.m.msgs); i++ {
		r.dequeue()
	}
	r.checkDead() // the drain dead-letters the messages past the limit
}

// checkDead compares the dead letters, in order, their delivery counts
// and the reasons the docs name.
func (r *modelRun) checkDead() {
	dl, err := r.q.DeadLetters(0, 1<<20)
	if err != nil {
		r.failf("dead letters: %v", err)
	}
	var dead []string
	for _, d := range dl {
		dead = append(dead, tokenOf(d.Payload))
	}
	if want := r.m.deadTokens(); !slices.Equal(dead, want) {
		r.failf("dead letters %v, the model has %v", dead, want)
	}
	for _, d := range dl {
		msg := r.m.msgs[tokenOf(d.Payload)]
		if d.Deliveries != msg.deliveries || msg.reason != "" && d.Reason != msg.reason {
			r.failf("dead letter %s: %d deliveries, reason %q; the model has %d, %q",
				msg.tok, d.Deliveries, d.Reason, msg.deliveries, msg.reason)
		}
	}
}

// FuzzSegment writes the input as segment files of a queue's log and opens
// them with wal (read-only: Verify and a full read) and with the queue
// (then drains it). Nothing may panic or hang, every failure must wrap
// ErrCorrupt, and nothing may allocate far beyond the input. The first
// byte picks the layout:
//
//	0: the input is the only segment;
//	1: a valid log (from a real queue), then the input appended to its tail;
//	2: a valid sealed segment, then the input as the tail segment;
//	3: a valid log, then an entry with a correct CRC whose records are cut
//	   from the input (random records reach the queue's decoder and replay).
//
//	go test ./fuzz -run '^$' -fuzz '^FuzzSegment$' -fuzztime 30s
func FuzzSegment(f *testing.F) {
	valid := validLog(f)
	f.Add(byte(0), valid)
	f.Add(byte(1), []byte{0x05, 1, 2, 3, 4, 5})
	f.Add(byte(2), valid)
	f.Add(byte(3), []byte{3, 0x9f, 1, 0, 0, 0xa0, 0, 0, 0, 0, 0, 0, 0xa0, 0xc0, 0xc4, 0, 0xa0, 0xc4, 0})
	f.Fuzz(func(t *testing.T, mode byte, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		dir := scratchDir(t)
		if err := writeDir(dir, segmentLayout(mode%4, valid, data)); err != nil {
			t.Fatal(err)
		}
		n := allocatedBy(func() { checkLogFiles(t, dir) })
		if limit := openAllocBound(len(data) + len(valid)); n > limit {
			t.Fatalf("opening %d bytes of segments allocated %d (limit %d)", len(data)+len(valid), n, limit)
		}
	})
}

// openAllocBound is what opening and draining a queue of n bytes may
// allocate: the fixed cost of a queue (buffers, indexes, goroutines,
// tidwall/wal's copy of the tail segment) plus a small multiple of n.
func openAllocBound(n int) uint64 { return 24<<20 + 64*uint64(n) }

var allocMu sync.Mutex // TotalAlloc counts every goroutine: one measurement at a time

// allocatedBy returns the bytes allocated while fn ran.
func allocatedBy(fn func()) uint64 {
	allocMu.Lock()
	defer allocMu.Unlock()
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// validLog returns the segment of a real queue log: enqueues, a lease, an
// ack, a batch and a close.
func validLog(f testing.TB) []byte {
	dir := f.TempDir()
	q, err := queue.Open(dir, &queue.Options{Sync: queue.SyncNever, SnapshotBytes: 1 << 30})
	if err != nil {
		f.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if _, err := q.Enqueue(context.Background(), payload(fmt.Sprint("v", i), 20), queue.WithID(fmt.Sprint("id", i))); err != nil {
			f.Fatal(err)
		}
	}
	m, err := q.TryDequeue()
	if err == nil {
		err = m.Ack()
	}
	if err == nil {
		_, err = q.EnqueueBatch(context.Background(), []queue.Item{{Payload: []byte("b0|")}, {Payload: []byte("b1|")}})
	}
	if err != nil {
		f.Fatal(err)
	}
	img, err := readDir(dir)
	q.Close()
	if err != nil {
		f.Fatal(err)
	}
	return img[segmentFiles(img)[0]]
}

// segmentLayout builds the log files for a FuzzSegment input.
func segmentLayout(mode byte, valid, data []byte) map[string][]byte {
	seg := func(index int) string { return filepath.Join("log", fmt.Sprintf("%020d", index)) }
	switch mode {
	case 0:
		return map[string][]byte{seg(1): data}
	case 1:
		return map[string][]byte{seg(1): append(slices.Clone(valid), data...)}
	case 2:
		return map[string][]byte{seg(1): valid, seg(1 + len(parseSegment(valid))): data}
	}
	ents := parseSegment(valid)
	last := ents[len(ents)-1].lastLSN()
	return map[string][]byte{seg(1): append(slices.Clone(valid), frameEntry(last+1, last, cutRecords(data))...)}
}

// cutRecords splits data into records: each starts with its length byte.
func cutRecords(data []byte) [][]byte {
	var recs [][]byte
	for len(data) > 0 {
		n := min(int(data[0]), len(data)-1)
		recs = append(recs, data[1:1+n])
		data = data[1+n:]
	}
	if len(recs) == 0 {
		recs = [][]byte{{}}
	}
	return recs
}

// checkLogFiles opens the log read-only and reads it, then opens and drains
// the queue; every error must wrap ErrCorrupt.
func checkLogFiles(t *testing.T, dir string) {
	l, err := wal.Open(filepath.Join(dir, "log"), &wal.Options{ReadOnly: true})
	if err == nil {
		if _, err = l.Verify(); err == nil || errors.Is(err, wal.ErrCorrupt) {
			err = readLog(l)
		}
		l.Close()
	}
	if err != nil && !errors.Is(err, wal.ErrCorrupt) && !errors.Is(err, wal.ErrNotFound) {
		t.Fatalf("read-only log: %v", err)
	}
	if _, err := drainFor(dir, fuzzDrainTime); err != nil && !errors.Is(err, queue.ErrCorrupt) {
		t.Fatalf("queue: %v", err)
	}
}

// readLog reads every record of l.
func readLog(l *wal.Log) error {
	r := l.NewReader(l.FirstLSN())
	defer r.Close()
	for {
		_, _, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// fuzzDrainTime bounds the drain of a fuzzed directory: a forged log or
// snapshot may hold thousands of messages, or counts that never reach zero.
const fuzzDrainTime = 250 * time.Millisecond

// drainFor opens and drains a queue directory within d, whatever its
// counts say: a bounded number of TryDequeue calls.
func drainFor(dir string, d time.Duration) ([]string, error) {
	o := drainOptions()
	q, err := queue.Open(dir, &o)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	var toks []string
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			return toks, nil
		}
		if err != nil {
			return toks, err
		}
		toks = append(toks, tokenOf(m.Payload))
	}
	return toks, fmt.Errorf("drain of %s took more than %v", dir, d)
}

// FuzzSnapshotFile writes the input as the directory's snapshot file and
// opens the queue: no panic, no hang, Open fails with ErrCorrupt or
// succeeds, and nothing allocates far beyond the input. With wrap, the
// input is the body of a file with a valid header and checksum, so that
// random bodies reach the state decoder (a body that decodes but does not
// match the log may fail the drain with any error, but must not panic).
//
//	go test ./fuzz -run '^$' -fuzz '^FuzzSnapshotFile$' -fuzztime 30s
func FuzzSnapshotFile(f *testing.F) {
	for _, body := range realSnapshotBodies(f) {
		f.Add(true, body)
		f.Add(false, recovery.Encode(9, body))
	}
	f.Fuzz(func(t *testing.T, wrap bool, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		dir := scratchDir(t)
		file := data
		if wrap {
			file = recovery.Encode(9, data)
		}
		if err := os.WriteFile(filepath.Join(dir, recovery.Name(9)), file, 0o600); err != nil {
			t.Fatal(err)
		}
		n := allocatedBy(func() {
			if _, err := drainFor(dir, fuzzDrainTime); err != nil && !wrap && !errors.Is(err, queue.ErrCorrupt) {
				t.Fatalf("open: %v", err)
			}
		})
		if limit := openAllocBound(len(data)); n > limit {
			t.Fatalf("opening a %d-byte snapshot allocated %d (limit %d)", len(data), n, limit)
		}
	})
}

// realSnapshotBodies returns the bodies of snapshots of an ack queue and a
// sorted queue with entries of every kind.
func realSnapshotBodies(f testing.TB) [][]byte {
	clock := newManualClock()
	o := queue.Options{Sync: queue.SyncNever, Clock: clock, ManualRequeue: true, MaxDeliveries: 1}
	dir := f.TempDir()
	q, err := queue.Open(dir, &o)
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		_, err = q.Enqueue(ctx, payload(fmt.Sprint("s", i), 8), queue.WithID(fmt.Sprint("id", i)))
	}
	_, err = q.Enqueue(ctx, []byte("later|"), queue.WithDelay(time.Hour))
	m, _ := q.TryDequeue()
	_ = m.Nack(0) // dead: MaxDeliveries 1
	_, _ = q.TryDequeue()
	q.Close()
	sdir := f.TempDir()
	s, err := queue.OpenSorted[int64](sdir, &queue.SortedOptions{Options: o})
	if err != nil {
		f.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		_ = s.Publish(ctx, int64(i%3), fmt.Sprint("k", i%2), []byte(fmt.Sprint("w", i, "|")))
	}
	bs, _ := s.TryPull(1)
	_ = bs[0].Nack(time.Minute)
	_, _ = s.TryPull(10)
	s.Close()
	var out [][]byte
	for _, d := range []string{dir, sdir} {
		_, body, err := recovery.Latest(d)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, body)
	}
	return out
}
