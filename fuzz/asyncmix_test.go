package fuzz_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walq/walq/fuzz"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
)

// TestAsyncMixFault runs producers and consumers side by side, mixing the
// asynchronous calls (EnqueueAsync, AckAsync, SettleAsync) with the
// synchronous ones (Enqueue, EnqueueBatch, Ack, Settle, Nack) and a
// goroutine that flushes and compacts, on 4 KiB segments (rolls) and a
// file system that fails one operation at a random point of the run, in
// every sync mode. Each time:
//
//   - every Pending completes, Close included (none is left hanging);
//   - a call begun after another call reported the log's failure fails
//     too, at once or through its Pending (the log is poisoned), a
//     TryDequeue too rather than say the queue is empty, and the retry of
//     a failed Enqueue with its producer-given id rather than say
//     ErrDuplicate (which the producer takes as enqueued); a Flush that
//     returns nil saw every asynchronous call in flight succeed;
//   - a reopen with the real file system holds every enqueue reported
//     durable and not acked, nothing acked, nothing twice, each with its
//     own payload's bytes (the Oracle; a call that failed is an attempt).
func TestAsyncMixFault(t *testing.T) {
	rng, _ := testRand(t)
	for _, mode := range []struct {
		name string
		sync queue.SyncMode
	}{{"always", queue.SyncAlways}, {"never", queue.SyncNever}, {"interval", queue.SyncInterval}} {
		t.Run(mode.name, func(t *testing.T) {
			base := scratchDir(t)
			dry := runAsyncMix(t, filepath.Join(base, "dry"), mode.sync, 0)
			if dry.failure() != nil {
				t.Fatalf("the workload fails without a fault: %v", dry.failure())
			}
			total := len(dry.fsys.Ops())
			var res fuzz.Result
			runs := scaled(100, 10)
			for i := range runs {
				n := 1 + rng.IntN(total)
				dir := filepath.Join(base, fmt.Sprint(i))
				r := runAsyncMix(t, dir, mode.sync, n)
				op, _ := r.fsys.Hit()
				what := fmt.Sprintf("run %d, N=%d (%s %s)", i, n, op.Kind, op.Path)
				if err := r.failure(); err != nil && !errors.Is(err, faultfs.ErrInjected) {
					t.Fatalf("%s: %v", what, err)
				}
				if r.late != "" {
					t.Fatalf("%s: %s", what, r.late)
				}
				d, err := drainQueue(filepath.Join(dir, "q"))
				if err != nil {
					t.Fatalf("%s: reopen after the fault: %v", what, err)
				}
				for k, p := range d.payloads {
					if tok := d.tokens[k]; !bytes.Equal(p, mixPayload(tok)) {
						t.Fatalf("%s: %s came back with other bytes (%d, want %d)", what, tok, len(p), len(mixPayload(tok)))
					}
				}
				o := r.oracle()
				if rr := o.Recovered(d.tokens); !rr.OK() {
					t.Fatalf("%s: %s", what, rr)
				}
				res = res.Add(o.Result())
			}
			t.Logf("%d runs of up to %d operations, one failed in each; %s", runs, total, res)
		})
	}
}

// mixCall is one call of the mixed workload and its outcome.
type mixCall struct {
	kind string
	enq  []string   // tokens it enqueues
	acks []string   // tokens it acks
	ok   bool       // returned nil, and its Pending (if any) completed with nil
	due  []*mixCall // a Flush: the asynchronous calls in flight when it began
}

// asyncMixRun is one run of the mixed workload.
type asyncMixRun struct {
	fsys *faultfs.FS

	mu    sync.Mutex
	calls []*mixCall
	async []*mixCall // the calls that returned a Pending, in order
	err   error      // the first error a call or a Pending reported
	late  string     // a call begun after a reported failure that succeeded
}

func (r *asyncMixRun) failure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// emptied notes a TryDequeue that found nothing; after says it began
// after a call reported the log's failure, when it must report that.
func (r *asyncMixRun) emptied(after bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if after && r.late == "" {
		r.late = fmt.Sprintf("TryDequeue said ErrEmpty after a reported failure (%v)", r.err)
	}
}

// oracle feeds the calls to an Oracle: every enqueue first, then the acks.
func (r *asyncMixRun) oracle() *fuzz.Oracle {
	o := fuzz.NewOracle()
	for _, c := range r.calls {
		for _, tok := range c.enq {
			o.EnqueueAttempt(tok)
			if c.ok {
				o.Enqueued(tok)
			}
		}
	}
	for _, c := range r.calls {
		for _, tok := range c.acks {
			o.AckAttempt(tok)
			if c.ok {
				o.Acked(tok)
			}
		}
	}
	return o
}

// mixPayload is the body of the message tok: its length depends on it.
func mixPayload(tok string) []byte {
	n := 0
	for _, b := range []byte(tok) {
		n = n*31 + int(b)
	}
	return payload(tok, 40+n%700)
}

// runAsyncMix runs the mixed workload in root/q on an FS that fails its
// failAt-th operation (0: none).
func runAsyncMix(t *testing.T, root string, mode queue.SyncMode, failAt int) *asyncMixRun {
	t.Helper()
	r := &asyncMixRun{fsys: faultfs.New(failAt)}
	opts := faultOptions(mode, r.fsys)
	opts.MaxPending = 64
	q, err := queue.Open(filepath.Join(root, "q"), opts)
	if err != nil {
		r.err = err
		return r
	}
	var failed atomic.Bool // a call or a Pending reported an error of the log
	var pendings sync.WaitGroup
	// begin records a call; end reports its outcome: err at once, else
	// its Pending's, waited for on a goroutine of its own.
	begin := func(c *mixCall) (after bool) {
		r.mu.Lock()
		r.calls = append(r.calls, c)
		r.mu.Unlock()
		return failed.Load()
	}
	report := func(c *mixCall, after bool, err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		c.ok = err == nil
		if err != nil && !errors.Is(err, queue.ErrClosed) {
			if r.err == nil {
				r.err = err
			}
			failed.Store(true)
		}
		if err == nil && after && c.kind != "flush" && r.late == "" {
			r.late = fmt.Sprintf("%s %v%v succeeded after a reported failure (%v)", c.kind, c.enq, c.acks, r.err)
		}
	}
	end := func(c *mixCall, after bool, p *queue.Pending, err error) {
		if err != nil || p == nil {
			report(c, after, err)
			return
		}
		r.mu.Lock()
		r.async = append(r.async, c)
		r.mu.Unlock()
		pendings.Add(1)
		go func() {
			defer pendings.Done()
			select {
			case <-p.Done():
				report(c, after, p.Err())
			case <-time.After(20 * time.Second):
				r.mu.Lock()
				r.late = fmt.Sprintf("the Pending of %s %v%v never completed", c.kind, c.enq, c.acks)
				r.mu.Unlock()
			}
		}()
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	const rounds = 150
	for g := range 3 { // producers: two asynchronous, one synchronous
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				tok := fmt.Sprintf("P%d-%d", g, i)
				if g < 2 {
					c := &mixCall{kind: "enqueue-async", enq: []string{tok}}
					after := begin(c)
					p, err := q.EnqueueAsync(ctx, mixPayload(tok))
					end(c, after, p, err)
					continue
				}
				if i%3 == 0 {
					toks := []string{tok + "a", tok + "b", tok + "c"}
					c := &mixCall{kind: "enqueue-batch", enq: toks}
					after := begin(c)
					items := []queue.Item{{Payload: mixPayload(toks[0])}, {Payload: mixPayload(toks[1])}, {Payload: mixPayload(toks[2])}}
					_, err := q.EnqueueBatch(ctx, items)
					end(c, after, nil, err)
					continue
				}
				c := &mixCall{kind: "enqueue", enq: []string{tok}}
				after := begin(c)
				_, err := q.Enqueue(ctx, mixPayload(tok), queue.WithID(tok))
				end(c, after, nil, err)
				if err != nil && !errors.Is(err, queue.ErrClosed) {
					// The producer retries with the same id, and takes
					// ErrDuplicate as the message being in the queue.
					c := &mixCall{kind: "enqueue-retry", enq: []string{tok}}
					after := begin(c)
					_, err := q.Enqueue(ctx, mixPayload(tok), queue.WithID(tok))
					if errors.Is(err, queue.ErrDuplicate) {
						err = nil
					}
					end(c, after, nil, err)
				}
			}
		}()
	}
	for g := range 2 { // consumers
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				var ms queue.Messages
				for range 1 + i%4 {
					c := &mixCall{kind: "dequeue"}
					after := begin(c)
					m, err := q.TryDequeue()
					if errors.Is(err, queue.ErrEmpty) {
						r.emptied(after)
						break
					}
					end(c, after, nil, err)
					if err != nil {
						break
					}
					ms = append(ms, m)
				}
				mixSettle(q, g, i, ms, begin, end)
			}
		}()
	}
	wg.Add(1)
	go func() { // flushes and compacts
		defer wg.Done()
		for i := range rounds / 4 {
			c := &mixCall{kind: "flush"}
			after := begin(c)
			r.mu.Lock()
			c.due = append([]*mixCall(nil), r.async...)
			r.mu.Unlock()
			end(c, after, nil, q.Flush(ctx))
			if i%2 == 1 {
				_ = q.Compact() // a failed snapshot alone does not poison the log
			}
		}
	}()
	wg.Wait()
	cerr := q.Close()
	pendings.Wait()
	r.checkFlushes()
	if cerr != nil && !errors.Is(cerr, queue.ErrClosed) {
		r.mu.Lock()
		if r.err == nil {
			r.err = cerr
		}
		r.mu.Unlock()
	}
	return r
}

// checkFlushes notes a Flush that returned nil although an asynchronous
// call begun before it failed.
func (r *asyncMixRun) checkFlushes() {
	for _, c := range r.calls {
		if c.kind != "flush" || !c.ok {
			continue
		}
		for _, a := range c.due {
			if !a.ok && r.late == "" {
				r.late = fmt.Sprintf("a Flush returned nil, but %s %v%v, in flight when it began, failed", a.kind, a.enq, a.acks)
			}
		}
	}
}

// mixSettle settles what a consumer dequeued, in one of five ways.
func mixSettle(q *queue.Queue, g, i int, ms queue.Messages, begin func(*mixCall) bool,
	end func(*mixCall, bool, *queue.Pending, error)) {
	if len(ms) == 0 {
		return
	}
	toks := make([]string, len(ms))
	for k, m := range ms {
		toks[k] = tokenOf(m.Payload)
	}
	switch (g + i) % 5 {
	case 0:
		c := &mixCall{kind: "settle-async", acks: toks}
		after := begin(c)
		p, err := q.SettleAsync(settleAll(ms)...)
		end(c, after, p, err)
	case 1:
		for k, m := range ms {
			c := &mixCall{kind: "ack-async", acks: toks[k : k+1]}
			after := begin(c)
			p, err := q.AckAsync(m.Receipt)
			end(c, after, p, err)
		}
	case 2:
		c := &mixCall{kind: "settle", acks: toks}
		after := begin(c)
		end(c, after, nil, q.Settle(settleAll(ms)...))
	case 3:
		c := &mixCall{kind: "nack"}
		after := begin(c)
		end(c, after, nil, ms.Nack(0))
	default:
		for k, m := range ms {
			c := &mixCall{kind: "ack", acks: toks[k : k+1]}
			after := begin(c)
			end(c, after, nil, m.Ack())
		}
	}
}

// settleAll acks every message, as settlements.
func settleAll(ms queue.Messages) []queue.Settlement {
	ss := make([]queue.Settlement, len(ms))
	for k, m := range ms {
		ss[k] = queue.Settlement{Receipt: m.Receipt, Op: queue.SettleAck}
	}
	return ss
}
