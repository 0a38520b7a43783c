package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/walq/walq/fuzz"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
)

// TestAsyncFaultEveryStep is TestFaultEveryStep for the asynchronous calls:
// bursts of EnqueueAsync, deliveries acked by AckAsync and SettleAsync,
// Flush, Compact and Close, on a file system that fails its Nth operation,
// for every N the workload reaches. Each Pending must complete (no hang,
// Close included), and its outcome must be true: one that reported nil is
// held to it by the Oracle after a reopen with the real file system (an
// enqueue is there unless acked, an ack is never undone), one that
// reported an error is an attempt. Once a Pending failed, every Pending of
// a later call fails too (the log is poisoned), and so does Flush.
func TestAsyncFaultEveryStep(t *testing.T) {
	for _, mode := range []struct {
		name string
		sync queue.SyncMode
	}{{"always", queue.SyncAlways}, {"never", queue.SyncNever}} {
		t.Run(mode.name, func(t *testing.T) {
			base := scratchDir(t)
			dry := runAsyncFault(t, filepath.Join(base, "dry"), mode.sync, 0)
			if dry.err != nil {
				t.Fatalf("the workload fails without a fault: %v", dry.err)
			}
			total := len(dry.fsys.Ops())
			var res fuzz.Result
			for n := 1; n <= total; n++ {
				dir := filepath.Join(base, fmt.Sprint(n))
				r := runAsyncFault(t, dir, mode.sync, n)
				op, _ := r.fsys.Hit()
				what := fmt.Sprintf("N=%d (%s %s)", n, op.Kind, op.Path)
				if r.err != nil && !errors.Is(r.err, faultfs.ErrInjected) {
					t.Fatalf("%s: %v", what, r.err)
				}
				d, err := drainQueue(filepath.Join(dir, "q"))
				if err != nil {
					t.Fatalf("%s: reopen after the fault: %v", what, err)
				}
				o := fuzz.NewOracle()
				for _, c := range r.calls {
					for _, tok := range c.enq {
						o.EnqueueAttempt(tok)
						if c.ok {
							o.Enqueued(tok)
						}
					}
					for _, tok := range c.acks {
						o.AckAttempt(tok)
						if c.ok {
							o.Acked(tok)
						}
					}
				}
				if rr := o.Recovered(d.tokens); !rr.OK() {
					t.Fatalf("%s: %s", what, rr)
				}
				res = res.Add(o.Result())
			}
			t.Logf("N=1..%d each failed and checked; %s", total, res)
		})
	}
}

// asyncFaultRun is one run: the calls with their outcomes.
type asyncFaultRun struct {
	fsys  *faultfs.FS
	calls []plOp // ok: returned nil and, if asynchronous, its Pending reported nil
	err   error  // the first error any call or Pending reported
}

// runAsyncFault runs the workload in root/q on an FS that fails its
// failAt-th operation (0: none).
func runAsyncFault(t *testing.T, root string, mode queue.SyncMode, failAt int) *asyncFaultRun {
	t.Helper()
	r := &asyncFaultRun{fsys: faultfs.New(failAt)}
	q, err := queue.Open(filepath.Join(root, "q"), faultOptions(mode, r.fsys))
	if err != nil {
		r.err = err
		return r
	}
	ctx := context.Background()
	type flight struct {
		p    *queue.Pending
		call int
	}
	var flying []flight
	failed := false // a Pending failed: every later Pending must fail
	note := func(op plOp, p *queue.Pending, err error) {
		op.ok = err == nil && p == nil
		r.calls = append(r.calls, op)
		if err != nil && r.err == nil {
			r.err = err
		}
		if p != nil {
			flying = append(flying, flight{p: p, call: len(r.calls) - 1})
		}
	}
	// settle waits for every Pending, in call order, with a bound.
	settle := func() {
		for _, f := range flying {
			select {
			case <-f.p.Done():
			case <-time.After(10 * time.Second):
				t.Fatalf("N=%d: a Pending of call %d (%s) never completed", failAt, f.call, r.calls[f.call].kind)
			}
			err := f.p.Err()
			if err == nil && failed {
				t.Fatalf("N=%d: call %d (%s) reported success after an earlier failure (%v)", failAt, f.call, r.calls[f.call].kind, r.err)
			}
			r.calls[f.call].ok = err == nil
			if err != nil {
				failed = true
				if r.err == nil {
					r.err = err
				}
			}
		}
		flying = flying[:0]
	}
	n := 0
	for round := 0; round < 12; round++ {
		for range 6 {
			tok := fmt.Sprint("A", n)
			n++
			p, err := q.EnqueueAsync(ctx, payload(tok, 100+n*37%300))
			note(plOp{kind: "enqueue-async", enq: []string{tok}}, p, err)
		}
		var ms []*queue.Message
		for range 4 {
			m, err := q.TryDequeue()
			if err != nil {
				if !errors.Is(err, queue.ErrEmpty) {
					note(plOp{kind: "dequeue"}, nil, err)
				}
				break
			}
			ms = append(ms, m)
		}
		for i, m := range ms {
			op := plOp{kind: "ack-async", acks: []string{tokenOf(m.Payload)}}
			var p *queue.Pending
			var err error
			switch {
			case i == 0 && round%3 == 1:
				op.kind = "settle-async"
				p, err = q.SettleAsync(queue.Settlement{Receipt: m.Receipt, Op: queue.SettleAck})
			case i == 1 && round%4 == 2:
				op.kind, op.acks = "nack", nil
				err = m.Nack(0)
			default:
				p, err = q.AckAsync(m.Receipt)
			}
			note(op, p, err)
		}
		switch round % 4 {
		case 1:
			note(plOp{kind: "flush"}, nil, q.Flush(ctx))
		case 3:
			note(plOp{kind: "compact"}, nil, q.Compact())
		}
		if round%2 == 1 {
			settle()
		}
	}
	// Close with calls in flight: they complete, with the outcome Close
	// made durable or the failure.
	cerr := q.Close()
	settle()
	if cerr != nil && !errors.Is(cerr, queue.ErrClosed) && r.err == nil {
		r.err = cerr
	}
	return r
}
