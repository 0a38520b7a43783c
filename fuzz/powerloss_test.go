package fuzz_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/walq/walq/internal/fakeclock"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walq/walq/fuzz"
	"github.com/walq/walq/queue"
)

// TestPowerLoss builds the on-disk states a power loss can leave and checks
// each with the oracle. A kill -9 cannot lose what the page cache holds, so
// these states are made by hand from a recorded history:
//
//  1. One goroutine runs a workload (enqueue, batch, delayed, dequeue, ack,
//     nack, dead-letter, lease expiry) with automatic compaction out of the
//     way, and after each operation k records the size of every segment
//     file (they only grow; the recorder checks it) and the log's
//     DurableLSN.
//  2. A crash "during operation k+1" keeps every byte that was durable
//     after operation k (sealed segments whole, the tail up to the last
//     entry at or below DurableLSN), plus a prefix of the bytes written
//     since, in the order they were written: a random length, torn at a
//     random byte, then left clean, followed by zeros (a size update that
//     beat the data), by zeros to the page boundary, or by garbage. A
//     segment file created by operation k+1 may be missing (its directory
//     entry was not fsynced) or empty; one exists only if the segment
//     before it is whole (it was fsynced at the roll).
//  3. Each state is written to a fresh directory, opened and drained; the
//     oracle counts an operation as acknowledged if its records are at or
//     below DurableLSN (all of operations 1..k under SyncAlways), as an
//     attempt otherwise. Under SyncInterval and SyncNever the recovered
//     queue must also be the state after some operation p between the
//     last durable one and k+1 (the log is cut at one point: no holes).
//     The repair must report a torn tail exactly when the last segment
//     holds bytes past its last whole entry.
//
// Long run: WALQ_POWERLOSS_STATES=100000 go test ./fuzz -run '^TestPowerLoss$' -timeout 1h -v
func TestPowerLoss(t *testing.T) {
	states := envInt(t, "WALQ_POWERLOSS_STATES", scaled(10000, 5))
	cases := []struct {
		name   string
		mode   queue.SyncMode
		ops    int
		states int
	}{
		{"always", queue.SyncAlways, 300, states},
		{"interval", queue.SyncInterval, 200, max(1, states/6)},
		{"never", queue.SyncNever, 200, max(1, states/6)},
	}
	var total fuzz.Result
	var count int
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng, seed := testRand(t)
			h := recordHistory(t, c.mode, c.ops, rng)
			r, n, cov := h.crashAll(t, seed, c.states)
			t.Logf("SUMMARY powerloss-%s: states=%d ops=%d segments=%d torn-tails-repaired=%d created-segment-dropped=%d %s",
				c.name, n, c.ops, len(h.final), cov.torn, cov.missing, r)
			total, count = total.Add(r), count+n
		})
	}
	t.Logf("SUMMARY powerloss: states=%d lost=%d unexpected=%d redelivered-after-ack=%d duplicates(allowed)=%d",
		count, total.Lost, total.Unexpected, total.RedeliveredAfterAck, total.Duplicates)
}

// plOp is what one operation of the recorded workload did.
type plOp struct {
	kind      string
	enq       []string // tokens enqueued, in order (a batch may survive as a prefix)
	acks      []string // tokens acked, in order (a batch ack)
	delivered []string // tokens delivered
	released  []string // tokens nacked, dead-lettered or expired: back in the queue
	async     bool     // enq and acks returned before their commit: their Pendings report them
	doneEnq   []string // tokens whose asynchronous enqueue a Pending reported done during this operation
	doneAcks  []string // tokens whose asynchronous ack a Pending reported done during this operation
}

// plState is the directory after one operation.
type plState struct {
	sizes   map[string]int64 // segment file sizes by relative path
	durable uint64           // DurableLSN
	last    uint64           // LastLSN
	at      time.Time        // when the operation returned
}

// plHistory is a recorded workload.
type plHistory struct {
	mode   queue.SyncMode
	final  map[string][]byte // the last contents of each segment file
	states []plState         // states[k]: after operation k (0: after Open)
	ops    []plOp            // ops[k], k >= 1
	enqAt  map[string]int    // token -> operation that enqueued it
	ackAt  map[string]int    // token -> operation whose ack of it returned (or was appended, when asynchronous)
	pos    map[string]int    // token -> position in its batch
	ackPos map[string]int    // token -> position in its batch ack
}

// recordHistory runs the workload and records it.
func recordHistory(t *testing.T, mode queue.SyncMode, nops int, rng *rand.Rand) *plHistory {
	dir := scratchDir(t)
	clock := newManualClock()
	q := mustOpen(t, dir, &queue.Options{Sync: mode, SyncInterval: 2 * time.Millisecond, SegmentSize: 4096,
		SnapshotBytes: 1 << 30, ManualRequeue: true, MaxDeliveries: 3, AckTimeout: 5 * time.Second, Clock: clock})
	defer q.Close()
	h := &plHistory{mode: mode, final: make(map[string][]byte), ops: []plOp{{kind: "open"}},
		enqAt: make(map[string]int), ackAt: make(map[string]int), pos: make(map[string]int),
		ackPos: make(map[string]int)}
	w := &plWorkload{t: t, q: q, rng: rng, clock: clock}
	h.record(t, q, dir)
	for k := 1; k <= nops; k++ {
		op := w.step(k)
		h.ops = append(h.ops, op)
		for i, tok := range op.enq {
			h.enqAt[tok], h.pos[tok] = k, i
		}
		for i, tok := range op.acks {
			h.ackAt[tok], h.ackPos[tok] = k, i
		}
		h.record(t, q, dir)
	}
	if st := q.Stats(); st.SnapshotLSN != 0 {
		t.Fatalf("a compaction ran during the recorded workload; the recorder needs files that only grow")
	}
	h.checkBounds(t)
	return h
}

// record notes the directory after an operation: the durable LSN first,
// then the files, so that every durable byte is in what it reads.
func (h *plHistory) record(t *testing.T, q *queue.Queue, dir string) {
	st := q.Stats()
	s := plState{sizes: make(map[string]int64), durable: st.DurableLSN, last: st.LastLSN, at: time.Now()}
	for _, p := range segmentPaths(dir) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel := filepath.Join("log", filepath.Base(p))
		if old := h.final[rel]; !bytes.HasPrefix(b, old) {
			t.Fatalf("%s was rewritten, not appended to (%d bytes, then %d)", rel, len(old), len(b))
		}
		h.final[rel], s.sizes[rel] = b, int64(len(b))
	}
	h.states = append(h.states, s)
}

// checkBounds checks the documented loss bounds on the recorded DurableLSN:
// under SyncAlways nothing returned is unsynced; under SyncInterval nothing
// that returned more than the interval ago (plus scheduling slack); under
// SyncNever nothing in a sealed segment.
func (h *plHistory) checkBounds(t *testing.T) {
	const slack = time.Second // scheduling on a loaded machine; the check is for "never fsyncs"
	var need, prevLast uint64 // LSN the last waiting operation made durable
	var asyncLast uint64      // last LSN of the last asynchronous operation
	for k, s := range h.states {
		switch h.mode {
		case queue.SyncAlways:
			// RequeueExpired does not wait for its records (the lease that
			// next delivers the message waits for them), a dequeue waits
			// for the write of its lease, not its fsync (the ack that
			// follows waits for both), and an operation that appends
			// nothing waits for nothing: after each operation, everything
			// up to the last record of the last operation that waited is
			// durable.
			if !noWait[h.ops[k].kind] && s.last > prevLast {
				need = s.last
			}
			// An asynchronous call appends without waiting; Flush (await)
			// waits for every one before it, not for the leases between.
			if h.ops[k].async {
				asyncLast = s.last
			}
			if h.ops[k].kind == "await" {
				need = max(need, asyncLast)
			}
			prevLast = s.last
			if s.durable < need {
				t.Fatalf("SyncAlways: after operation %d (%s) DurableLSN %d < %d", k, h.ops[k].kind, s.durable, need)
			}
			h.checkReported(t, k)
		case queue.SyncInterval:
			for j := 0; j < k; j++ {
				if s.at.Sub(h.states[j].at) > 2*time.Millisecond+slack && h.states[j].last > s.durable {
					t.Fatalf("SyncInterval: operation %d returned %v before operation %d, still not durable",
						j, s.at.Sub(h.states[j].at), k)
				}
			}
		}
		if noWait[h.ops[k].kind] {
			// The operation returned before its records were written: the
			// committer may be between a roll-over (tidwall/wal creates the
			// next file and fsyncs the sealed one) and raising DurableLSN.
			continue
		}
		names := sortedNames(s.sizes)
		for _, name := range names[:max(0, len(names)-1)] {
			for _, e := range parseSegment(h.final[name][:s.sizes[name]]) {
				if e.lastLSN() > s.durable {
					t.Fatalf("after operation %d sealed segment %s holds LSN %d > DurableLSN %d", k, name, e.lastLSN(), s.durable)
				}
			}
		}
	}
}

// checkReported checks, under SyncAlways, that every asynchronous call
// whose Pending reported done during operation k was durable then: its
// records at or below the DurableLSN recorded after k. The workload is one
// goroutine and nothing runs in the background, so operation j appends
// the LSNs after states[j-1].last, in call order.
func (h *plHistory) checkReported(t *testing.T, k int) {
	s, op := h.states[k], h.ops[k]
	for _, tok := range op.doneEnq {
		j := h.enqAt[tok]
		if lsn := h.states[j-1].last + uint64(h.pos[tok]) + 1; lsn > s.durable {
			t.Fatalf("SyncAlways: the Pending of enqueue %s (LSN %d) reported done during operation %d, DurableLSN %d", tok, lsn, k, s.durable)
		}
	}
	for _, tok := range op.doneAcks {
		if lsn := h.states[h.ackAt[tok]].last; lsn > s.durable {
			t.Fatalf("SyncAlways: the Pending of ack %s (LSN %d) reported done during operation %d, DurableLSN %d", tok, lsn, k, s.durable)
		}
	}
}

// noWait names the operations that do not wait for a commit.
var noWait = map[string]bool{"expire": true, "nothing held": true, "dequeue-empty": true, "dequeue": true,
	"async-enqueue": true, "async-ack": true}

// plWorkload is the recorded workload's driver.
type plWorkload struct {
	t      *testing.T
	q      *queue.Queue
	rng    *rand.Rand
	clock  *fakeclock.Clock
	held   []*queue.Message // delivered, not yet acked or given back
	n      int              // tokens made
	flying []plFlight       // asynchronous calls whose Pending has not been seen done
}

// plFlight is an asynchronous call of the workload and the tokens it
// enqueued or acked.
type plFlight struct {
	p    *queue.Pending
	toks []string
	ack  bool // acks, not enqueues
}

func (w *plWorkload) token() string {
	w.n++
	return fmt.Sprintf("P%d", w.n)
}

// step runs one random operation, then notes the asynchronous calls whose
// Pending is done (before the state is recorded: DurableLSN was raised
// before they completed).
func (w *plWorkload) step(k int) plOp {
	var op plOp
	if w.rng.IntN(100) < 25 {
		op = w.asyncStep()
	} else {
		op = w.syncStep()
	}
	op.doneEnq, op.doneAcks = w.reap()
	return op
}

// asyncStep streams enqueues or acks without waiting, acks a batch in one
// commit, or waits for everything in flight (Flush).
func (w *plWorkload) asyncStep() plOp {
	t, q, rng, ctx := w.t, w.q, w.rng, context.Background()
	switch r := rng.IntN(100); {
	case r < 40:
		op := plOp{kind: "async-enqueue", async: true}
		for range 1 + rng.IntN(4) {
			tok := w.token()
			var opts []queue.EnqueueOption
			if rng.IntN(10) == 0 {
				opts = append(opts, queue.WithDelay(time.Second))
			}
			p, err := q.EnqueueAsync(ctx, payload(tok, 20+rng.IntN(300)), opts...)
			if err != nil {
				t.Fatal(err)
			}
			w.flying = append(w.flying, plFlight{p: p, toks: []string{tok}})
			op.enq = append(op.enq, tok)
		}
		return op
	case r < 85:
		if len(w.held) == 0 {
			return plOp{kind: "nothing held"}
		}
		n := 1 + rng.IntN(min(4, len(w.held)))
		ms := queue.Messages(w.held[:n])
		w.held = append([]*queue.Message(nil), w.held[n:]...)
		op := plOp{kind: "batch-ack", acks: toksOf(ms)}
		if r < 60 {
			if err := ms.Ack(); err != nil {
				t.Fatalf("batch ack: %v", err)
			}
			return op
		}
		p, err := ms.AckAsync()
		if err != nil {
			t.Fatalf("async ack: %v", err)
		}
		w.flying = append(w.flying, plFlight{p: p, toks: op.acks, ack: true})
		op.kind, op.async = "async-ack", true
		return op
	default:
		if err := q.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		return plOp{kind: "await"}
	}
}

// reap returns the tokens of the asynchronous enqueues and acks now done.
func (w *plWorkload) reap() (enq, acks []string) {
	left := w.flying[:0]
	for _, f := range w.flying {
		select {
		case <-f.p.Done():
			if err := f.p.Err(); err != nil {
				w.t.Fatalf("pending %v: %v", f.toks, err)
			}
			if f.ack {
				acks = append(acks, f.toks...)
			} else {
				enq = append(enq, f.toks...)
			}
		default:
			left = append(left, f)
		}
	}
	w.flying = left
	return enq, acks
}

func toksOf(ms queue.Messages) []string {
	toks := make([]string, len(ms))
	for i, m := range ms {
		toks[i] = tokenOf(m.Payload)
	}
	return toks
}

// syncStep runs one random operation that waits for its commit.
func (w *plWorkload) syncStep() plOp {
	t, q, rng, ctx := w.t, w.q, w.rng, context.Background()
	switch r := rng.IntN(100); {
	case r < 38:
		tok := w.token()
		var opts []queue.EnqueueOption
		if rng.IntN(10) == 0 {
			opts = append(opts, queue.WithDelay(time.Second))
		}
		mustEnqueue(t, q, payload(tok, 20+rng.IntN(300)), opts...)
		return plOp{kind: "enqueue", enq: []string{tok}}
	case r < 48:
		toks := make([]string, 2+rng.IntN(3))
		items := make([]queue.Item, len(toks))
		for i := range toks {
			toks[i] = w.token()
			items[i] = queue.Item{Payload: payload(toks[i], 20+rng.IntN(200))}
		}
		if _, err := q.EnqueueBatch(ctx, items); err != nil {
			t.Fatal(err)
		}
		return plOp{kind: "batch", enq: toks}
	case r < 72:
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			return plOp{kind: "dequeue-empty"}
		}
		if err != nil {
			t.Fatal(err)
		}
		w.held = append(w.held, m)
		return plOp{kind: "dequeue", delivered: []string{tokenOf(m.Payload)}}
	case r < 97:
		return w.settle(rng.IntN(100))
	default:
		w.clock.Advance(6 * time.Second)
		if _, err := q.RequeueExpired(); err != nil {
			t.Fatal(err)
		}
		op := plOp{kind: "expire"}
		for _, m := range w.held {
			op.released = append(op.released, tokenOf(m.Payload))
		}
		w.held = nil
		return op
	}
}

// settle acks (mostly), nacks or dead-letters a held message.
func (w *plWorkload) settle(r int) plOp {
	if len(w.held) == 0 {
		return plOp{kind: "nothing held"}
	}
	i := w.rng.IntN(len(w.held))
	m := w.held[i]
	w.held = append(w.held[:i], w.held[i+1:]...)
	tok := tokenOf(m.Payload)
	var err error
	op := plOp{released: []string{tok}}
	switch {
	case r < 75:
		err, op = m.Ack(), plOp{kind: "ack", acks: []string{tok}}
	case r < 92:
		err, op.kind = m.Nack(0), "nack"
	case r < 97:
		err, op.kind = m.DeadLetter("power loss test"), "dead-letter"
	default:
		_, err = w.q.RequeueAllDead()
		op.kind = "requeue-dead"
		w.held = append(w.held, m)
		op.released = nil
	}
	if err != nil {
		w.t.Fatalf("%s %s: %v", op.kind, tok, err)
	}
	return op
}

// crashAll checks n crash states, spread over the operations, on as many
// workers as there are CPUs; WALQ_POWERLOSS_STATE=i checks only state i.
func (h *plHistory) crashAll(t *testing.T, seed uint64, n int) (fuzz.Result, int, plCoverage) {
	nops := len(h.ops) - 1
	only := envInt(t, "WALQ_POWERLOSS_STATE", -1)
	idx := make(chan int)
	var mu sync.Mutex
	var total fuzz.Result
	var cov plCoverage
	var failure string
	checked := 0
	var wg sync.WaitGroup
	base := scratchDir(t)
	for w := range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				dir := filepath.Join(base, fmt.Sprint(w, "-", i))
				r, c, err := h.crashOne(seed, i, nops, dir)
				os.RemoveAll(dir)
				mu.Lock()
				total, checked = total.Add(r), checked+1
				cov.torn, cov.missing = cov.torn+c.torn, cov.missing+c.missing
				if err != nil && failure == "" {
					failure = err.Error()
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		if only >= 0 && i != only {
			continue
		}
		mu.Lock()
		stop := failure != ""
		mu.Unlock()
		if stop {
			break
		}
		idx <- i
	}
	close(idx)
	wg.Wait()
	if failure != "" {
		t.Fatalf("%s\n(replay: WALQ_SEED=%d WALQ_POWERLOSS_STATE=<state>)", failure, seed)
	}
	return total, checked, cov
}

// plCoverage counts what the crash states exercised.
type plCoverage struct {
	torn    int // states whose Open repaired a torn tail
	missing int // states that lost a segment file the operation created
}

// crashOne builds crash state i, drains it and checks it.
func (h *plHistory) crashOne(seed uint64, i, nops int, dir string) (fuzz.Result, plCoverage, error) {
	k := i % nops // a crash during operation k+1
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	files, desc := h.crashFiles(k, rng)
	var cov plCoverage
	if strings.Contains(desc, "missing") {
		cov.missing = 1
	}
	what := fmt.Sprintf("state %d: crash during operation %d (%s), %s", i, k+1, h.ops[k+1].kind, desc)
	if err := writeDir(dir, files); err != nil {
		return fuzz.Result{}, cov, err
	}
	d, err := drainQueue(dir)
	if err != nil {
		return fuzz.Result{}, cov, fmt.Errorf("%s: %w", what, err)
	}
	if d.recovery.Log.Torn != nil {
		cov.torn = 1
	}
	if err := h.checkTorn(files, d.recovery); err != nil {
		return fuzz.Result{}, cov, fmt.Errorf("%s: %w", what, err)
	}
	pDur := h.durableOp(k)
	o := h.oracle(k, pDur)
	if r := o.Recovered(d.tokens); !r.OK() {
		return o.Result(), cov, fmt.Errorf("%s: %s", what, r)
	}
	if h.mode != queue.SyncAlways {
		if err := h.checkPrefix(d.tokens, pDur, k+1); err != nil {
			return o.Result(), cov, fmt.Errorf("%s: %w", what, err)
		}
	}
	return o.Result(), cov, nil
}

// durableOp returns the last operation all of whose records were durable
// after operation k.
func (h *plHistory) durableOp(k int) int {
	p := 0
	for j := 0; j <= k; j++ {
		if h.states[j].last <= h.states[k].durable {
			p = j
		}
	}
	return p
}

// oracle returns an oracle fed with operations 1..k+1: acknowledged up to
// pDur, attempts after. An asynchronous enqueue or ack counts as
// acknowledged under SyncAlways once its Pending reported it done during
// an operation up to k, whatever DurableLSN says; under the other modes
// it counts as the waiting calls do, by pDur.
func (h *plHistory) oracle(k, pDur int) *fuzz.Oracle {
	o := fuzz.NewOracle()
	for j := 1; j <= k+1; j++ {
		op, acked := h.ops[j], j <= pDur
		if op.async && h.mode == queue.SyncAlways {
			acked = false // acknowledged below, at the report
		}
		for _, tok := range op.enq {
			o.EnqueueAttempt(tok)
			if acked {
				o.Enqueued(tok)
			}
		}
		if !acked {
			for _, tok := range op.acks {
				o.AckAttempt(tok)
			}
		}
		if j <= k && h.mode == queue.SyncAlways {
			h.reported(o, op)
		}
		if !acked {
			continue
		}
		for _, tok := range op.delivered {
			o.Delivered(tok)
		}
		for _, tok := range op.acks {
			o.AckAttempt(tok)
			o.Acked(tok)
		}
		for _, tok := range op.released {
			o.Released(tok)
		}
	}
	return o
}

// reported feeds the oracle the asynchronous calls that op saw done.
func (h *plHistory) reported(o *fuzz.Oracle, op plOp) {
	for _, tok := range op.doneEnq {
		o.Enqueued(tok)
	}
	for _, tok := range op.doneAcks {
		o.Acked(tok)
	}
}

// checkPrefix checks that the drained set is the state after some
// operation p in [from, to], with perhaps a prefix of operation p+1's batch.
func (h *plHistory) checkPrefix(drained []string, from, to int) error {
	got := make(map[string]bool, len(drained))
	for _, tok := range drained {
		got[tok] = true
	}
	for p := to; p >= from; p-- {
		if h.matches(got, p) {
			return nil
		}
	}
	return fmt.Errorf("the recovered queue (%d messages) is not the state after any operation in [%d, %d]: the log lost a record and kept a later one", len(drained), from, to)
}

// matches reports whether got is the live set after operation p, plus a
// prefix of operation p+1's enqueues.
func (h *plHistory) matches(got map[string]bool, p int) bool {
	extra, gone := 0, 0
	for tok, at := range h.enqAt {
		ack, acked := h.ackAt[tok]
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
	for tok, ack := range h.ackAt { // the acked ones must be the batch ack's first ones
		if ack == p+1 && h.ackPos[tok] < gone && got[tok] {
			return false
		}
	}
	if extra == 0 {
		return true
	}
	for tok, at := range h.enqAt { // the extras must be the batch's first ones
		if at == p+1 && h.pos[tok] < extra && !got[tok] {
			return false
		}
	}
	return true
}

// checkTorn checks that Open reported a torn tail exactly when the last
// segment held bytes after its last whole entry.
func (h *plHistory) checkTorn(files map[string][]byte, rec queue.Recovery) error {
	segs := segmentFiles(files)
	junk := false
	if len(segs) > 0 {
		b := files[segs[len(segs)-1]]
		ents := parseSegment(b)
		end := int64(0)
		if len(ents) > 0 {
			end = ents[len(ents)-1].end
		}
		junk = int64(len(b)) > end
	}
	if junk != (rec.Log.Torn != nil) {
		return fmt.Errorf("torn tail on disk %v, reported %v", junk, rec.Log.Torn)
	}
	return nil
}

// crashFiles builds the directory a power loss during operation k+1 can
// leave, and describes it.
func (h *plHistory) crashFiles(k int, rng *rand.Rand) (map[string][]byte, string) {
	before, after := h.states[k], h.states[k+1]
	names := sortedNames(after.sizes)
	tail := ""
	if bn := sortedNames(before.sizes); len(bn) > 0 {
		tail = bn[len(bn)-1]
	}
	files := make(map[string][]byte)
	var regions []plRegion // bytes not durable, in the order they were written
	for _, name := range names {
		content := h.final[name][:after.sizes[name]]
		_, existed := before.sizes[name]
		switch {
		case existed && name != tail:
			files[name] = content // sealed: fsynced at its roll
		case existed:
			d := h.durableOffset(name, before)
			files[name] = content[:d]
			regions = append(regions, plRegion{name: name, data: content, from: d})
		default:
			regions = append(regions, plRegion{name: name, data: content, created: true})
		}
	}
	cut := chooseCut(rng, regions)
	return files, applyCut(files, regions, cut, rng)
}

// plRegion is the part of a file written after the last fsync.
type plRegion struct {
	name    string
	data    []byte // the file's contents after the operation
	from    int64  // bytes durable
	created bool   // the file was created by the operation
}

// chooseCut picks how many of the regions' bytes reached the disk: often an
// entry boundary or a byte next to one, otherwise anywhere.
func chooseCut(rng *rand.Rand, regions []plRegion) int64 {
	var total int64
	var bounds []int64
	for _, r := range regions {
		for _, e := range parseSegment(r.data) {
			if e.end > r.from {
				bounds = append(bounds, total+e.end-r.from)
			}
		}
		total += int64(len(r.data)) - r.from
	}
	switch x := rng.IntN(10); {
	case total == 0 || x == 0:
		return 0
	case x == 1:
		return total
	case x < 5 && len(bounds) > 0:
		b := bounds[rng.IntN(len(bounds))] + int64(rng.IntN(3)) - 1
		return min(max(b, 0), total)
	default:
		return rng.Int64N(total + 1)
	}
}

// applyCut writes the first cut bytes of the regions into files, tears the
// file where the cut falls, and returns a description.
func applyCut(files map[string][]byte, regions []plRegion, cut int64, rng *rand.Rand) string {
	desc := fmt.Sprintf("cut %d", cut)
	for i, r := range regions {
		n := int64(len(r.data)) - r.from
		if cut >= n && i < len(regions)-1 && !(n == 0 && r.created && rng.IntN(2) == 0) {
			files[r.name] = r.data // whole: the next file was created after its fsync
			cut -= n
			continue
		}
		if r.created && cut == 0 && rng.IntN(2) == 0 {
			return desc + fmt.Sprintf(", %s missing (created, directory not fsynced)", r.name)
		}
		keep := r.from + min(cut, n)
		b := append([]byte(nil), r.data[:keep]...)
		b, tear := tearAt(b, rng)
		files[r.name] = b
		return desc + fmt.Sprintf(", %s kept %d of %d bytes, then %s", r.name, keep, len(r.data), tear)
	}
	return desc + ", nothing unsynced"
}

// tearAt adds what a torn write can leave after the last byte that reached
// the disk.
func tearAt(b []byte, rng *rand.Rand) ([]byte, string) {
	switch rng.IntN(4) {
	case 0:
		return b, "clean"
	case 1:
		n := 1 + rng.IntN(600)
		return append(b, make([]byte, n)...), fmt.Sprintf("%d zeros", n)
	case 2:
		n := 4096 - len(b)%4096
		return append(b, make([]byte, n)...), fmt.Sprintf("zeros to the page end (%d)", n)
	default:
		g := make([]byte, 1+rng.IntN(300))
		for i := range g {
			g[i] = byte(rng.Uint32())
		}
		return append(b, g...), fmt.Sprintf("%d bytes of garbage", len(g))
	}
}

// durableOffset returns how many bytes of a segment were durable in state
// s: the whole entries at or below its DurableLSN.
func (h *plHistory) durableOffset(name string, s plState) int64 {
	var off int64
	for _, e := range parseSegment(h.final[name][:s.sizes[name]]) {
		if e.lastLSN() > s.durable {
			break
		}
		off = e.end
	}
	return off
}

func sortedNames(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
