package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/walq/walq/fuzz"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestFaultEveryStep runs a fixed workload (an open that creates the
// queue's directories, or one that cuts a torn tail,
// enqueues, batches, dequeues, acks, nacks, compactions with their
// snapshot and log truncation, segment rolls, close) on a file system that fails its Nth
// operation (internal/faultfs: open, write, fsync, truncate, rename,
// remove, mkdir, directory fsync, and tidwall/wal's own batch writes and
// front truncations), for every N the workload reaches, in process and
// without root. Each time it checks that:
//
//   - the fault reached a caller: some call (Open, an operation, Close)
//     returned an error wrapping the injected one;
//   - a fault in the log (its files, its directory, tidwall/wal's writes)
//     poisons it: an enqueue after it fails, though the disk works again
//     (a failed snapshot, by design, leaves a healthy log usable);
//   - nothing false was acknowledged: a reopen with the real file system
//     opens, and its drain holds every enqueue that returned nil and not
//     acked, and nothing acked (the Oracle; a call that failed is an
//     attempt).
//
// The summary lists the N values run and the kinds of operation failed.
func TestFaultEveryStep(t *testing.T) {
	for _, mode := range []struct {
		name  string
		sync  queue.SyncMode
		fresh bool // start from no directory at all, not from the seed
	}{{"always", queue.SyncAlways, false}, {"never", queue.SyncNever, false}, {"always/new-directory", queue.SyncAlways, true}} {
		t.Run(mode.name, func(t *testing.T) {
			base := scratchDir(t)
			seed, seeded := "", []string(nil)
			if !mode.fresh {
				seed = filepath.Join(base, "seed")
				seeded = faultSeed(t, seed, mode.sync)
			}
			dry := runFaultWorkload(t, seed, filepath.Join(base, "dry"), mode.sync, 0)
			if dry.err != nil {
				t.Fatalf("the workload fails without a fault: %s: %v", dry.errCall, dry.err)
			}
			total := len(dry.fsys.Ops())
			kinds := map[string]int{}
			var res fuzz.Result
			atOpen, atClose, poisoned, snapshots := 0, 0, 0, 0
			for n := 1; n <= total; n++ {
				dir := filepath.Join(base, fmt.Sprint(n))
				r := runFaultWorkload(t, seed, dir, mode.sync, n)
				op, ok := r.fsys.Hit()
				if !ok {
					t.Fatalf("N=%d: the workload made %d operations this time, %d without a fault", n, len(r.fsys.Ops()), total)
				}
				kinds[op.Kind]++
				what := fmt.Sprintf("N=%d (%s %s)", n, op.Kind, op.Path)
				if r.err == nil || !errors.Is(r.err, faultfs.ErrInjected) {
					t.Fatalf("%s: no caller got the injected error (first error: %v)", what, r.err)
				}
				switch {
				case r.errCall == "Open":
					atOpen++
				case r.errCall == "Close": // nothing to enqueue after it
					atClose++
				case logOp(dir, op):
					if !r.refused {
						t.Fatalf("%s: the log accepted an enqueue after %s failed with %v", what, r.errCall, r.err)
					}
					poisoned++
				default:
					snapshots++
				}
				d, err := drainQueue(filepath.Join(dir, "q"))
				if err != nil {
					t.Fatalf("%s: reopen after the fault: %v", what, err)
				}
				o := r.oracle(seeded)
				if rr := o.Recovered(d.tokens); !rr.OK() {
					t.Fatalf("%s, failed in %s: %s", what, r.errCall, rr)
				}
				res = res.Add(o.Result())
			}
			t.Logf("SUMMARY faults-%s: N=1..%d, each failed and checked; failed operations by kind: %s; failed Open %d, failed Close %d, poisoned the log %d, failed a snapshot %d; %s",
				mode.name, total, sortedCounts(kinds), atOpen, atClose, poisoned, snapshots, res)
		})
	}
}

// logOp reports whether op concerns the log: a file or the directory under
// dir/q/log, or a write tidwall/wal makes itself.
func logOp(dir string, op faultfs.Op) bool {
	logDir := filepath.Join(dir, "q", "log")
	return op.Path == "" || op.Path == logDir || strings.HasPrefix(op.Path, logDir+string(filepath.Separator))
}

func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}

// faultRun is one run of the fault workload.
type faultRun struct {
	fsys    *faultfs.FS
	calls   []plOp // the calls and their outcomes (plOp: powerloss_test.go)
	err     error  // the first error a call returned
	errCall string // the call that returned it
	refused bool   // after the error, an enqueue (on a working disk) failed
}

// oracle returns an Oracle fed with the seed's enqueues and the calls:
// acknowledged when they returned nil (no power was lost: what was written
// stays).
func (r *faultRun) oracle(seeded []string) *fuzz.Oracle {
	o := fuzz.NewOracle()
	for _, tok := range seeded {
		o.EnqueueAttempt(tok)
		o.Enqueued(tok)
	}
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
	return o
}

// faultOptions are the workload's queue options.
func faultOptions(mode queue.SyncMode, fsys *faultfs.FS) *queue.Options {
	opts := &queue.Options{Sync: mode, SegmentSize: 4096, SnapshotBytes: 1 << 30, ManualRequeue: true,
		AckTimeout: time.Hour, Clock: newManualClock(), FS: fsys}
	testhook.SetManualCompaction(opts)
	return opts
}

// faultSeed makes, with the real file system, the directory every run
// starts from: a queue holding a few messages whose log tail ends in a
// torn write, which the run's Open cuts. It returns their tokens.
func faultSeed(t *testing.T, root string, mode queue.SyncMode) []string {
	t.Helper()
	q := mustOpen(t, filepath.Join(root, "q"), faultOptions(mode, faultfs.New(0)))
	var toks []string
	for i := range 5 {
		toks = append(toks, fmt.Sprint("S", i))
		mustEnqueue(t, q, payload(toks[i], 100))
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segmentPaths(filepath.Join(root, "q"))
	f, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		_, err = f.Write([]byte{0x40, 1, 2, 3, 4, 5, 6, 7}) // a frame that runs past the end
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

// runFaultWorkload copies the seed (if any) to root and runs the fixed workload in
// root/q on an FS that fails its failAt-th operation (0: none), stopping at
// the first error; then it tries one more enqueue and closes the queue.
func runFaultWorkload(t *testing.T, seed, root string, mode queue.SyncMode, failAt int) *faultRun {
	t.Helper()
	if seed != "" {
		if err := copyDir(seed, root); err != nil {
			t.Fatal(err)
		}
	}
	r := &faultRun{fsys: faultfs.New(failAt)}
	q, err := queue.Open(filepath.Join(root, "q"), faultOptions(mode, r.fsys))
	if err != nil {
		r.err, r.errCall = err, "Open"
		return r
	}
	r.steps(q)
	if r.err != nil {
		tok := fmt.Sprint("after-", failAt)
		_, err := q.Enqueue(context.Background(), payload(tok, 50))
		r.calls = append(r.calls, done(plOp{kind: "enqueue after the error", enq: []string{tok}}, err))
		r.refused = err != nil
	}
	if err := q.Close(); err != nil && r.err == nil {
		r.err, r.errCall = err, "Close"
	}
	return r
}

// steps is the fixed workload; it stops at the first error.
func (r *faultRun) steps(q *queue.Queue) {
	ctx := context.Background()
	var held []*queue.Message
	call := func(op plOp, err error) bool {
		r.calls = append(r.calls, done(op, err))
		if err != nil {
			r.err, r.errCall = err, fmt.Sprintf("call %d (%s)", len(r.calls), op.kind)
		}
		return err == nil
	}
	for i := 0; i < 36; i++ {
		tok := fmt.Sprint("F", i)
		_, err := q.Enqueue(ctx, payload(tok, 150+i*17%250))
		if !call(plOp{kind: "enqueue", enq: []string{tok}}, err) {
			return
		}
		switch {
		case i%5 == 4 && i < 20:
			items := []queue.Item{{Payload: payload(tok+"a", 120)}, {Payload: payload(tok+"b", 90)}}
			_, err := q.EnqueueBatch(ctx, items)
			if !call(plOp{kind: "batch", enq: []string{tok + "a", tok + "b"}}, err) {
				return
			}
		case i%3 != 0:
			m, err := q.TryDequeue()
			if !call(plOp{kind: "dequeue"}, err) {
				return
			}
			held = append(held, m)
		}
		if i%2 == 1 && len(held) > 0 {
			m := held[0]
			held = held[1:]
			var err error
			op := plOp{kind: "ack", acks: []string{tokenOf(m.Payload)}}
			if i%10 == 9 {
				op, err = plOp{kind: "nack"}, m.Nack(0)
			} else {
				err = m.Ack()
			}
			if !call(op, err) {
				return
			}
		}
		if i%9 == 8 && !call(plOp{kind: "compact"}, q.Compact()) {
			return
		}
	}
}
