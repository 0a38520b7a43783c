package main

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestSystemsDeliverEverything runs every adapter through small versions of
// the workloads it takes part in: nothing may be lost, duplicated, damaged or
// reordered.
func TestSystemsDeliverEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("opens every system on disk")
	}
	opts := runOpts{N: 200, Cap: time.Minute, Idle: 10 * time.Second}
	cells := []struct {
		run runner
		c   cell
	}{
		{queueRunner(runDrain), cell{Workload: wDrain, Payload: 100, Producers: 1, Consumers: 1}},
		{queueRunner(runCycle), cell{Workload: wCycle, Payload: 1024, Producers: 4, Consumers: 4}},
		{runEnqueue, cell{Workload: wEnqueue, Payload: 100, Producers: 4}},
	}
	for _, s := range allSystems() {
		for _, tc := range cells {
			if !applies(s, tc.c.Workload) {
				continue
			}
			t.Run(s.Name+"/"+tc.c.Workload, func(t *testing.T) {
				out := tc.run(context.Background(), s, t.TempDir(), tc.c, opts)
				if e := allErrors(out); e != "" {
					t.Errorf("errors: %s", e)
				}
				if out[0].Ops != int64(opts.N) {
					t.Errorf("%d messages went through, want %d", out[0].Ops, opts.N)
				}
			})
		}
	}
}

// TestQueuesSurviveReopen enqueues, closes, reopens and drains every queue
// system: the backlog and recovery workloads depend on it.
func TestQueuesSurviveReopen(t *testing.T) {
	if testing.Short() {
		t.Skip("opens every system on disk")
	}
	const n, size = 50, 100
	for _, s := range allSystems() {
		if s.Kind != KindQueue {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			q, err := s.Open(dir, Hint{Producers: 1, Payload: size})
			if err != nil {
				t.Fatal(err)
			}
			var errs errorLog
			var never atomic.Bool
			prod := produce(ctx, q, 1, n, size, &never, &errs)
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			chk := newChecker(1, n, size, s.FIFO)
			chk.expect(prod.counts)
			q, err = s.Open(dir, Hint{Consumers: 1, Payload: size})
			if err != nil {
				t.Fatal(err)
			}
			firstMessage(ctx, q, chk.view(), 10*time.Second, &errs)
			drainAll(ctx, q, 1, chk, n-1, 10*time.Second, &errs)
			if err := q.Close(); err != nil {
				t.Error(err)
			}
			if p := append(errs.list(), chk.problems()...); len(p) > 0 {
				t.Errorf("after reopen: %v", p)
			}
		})
	}
}

// TestStreamRowsTakePart checks where walq's streaming rows run: the
// durable one where durable systems are compared, the no-fsync one in the
// no-fsync drain and cycle only (it is no durable enqueue, and the bulk
// loads and the sorted queue are measured once per sync mode).
func TestStreamRowsTakePart(t *testing.T) {
	want := map[string][]string{
		"walq/stream":       {wDrain, wCycle, wEnqueue},
		"walq/never-stream": {wDrain, wCycle},
	}
	for _, s := range allSystems() {
		only, ok := want[s.Name]
		if !ok {
			continue
		}
		delete(want, s.Name)
		t.Run(s.Name, func(t *testing.T) {
			for _, w := range []string{wDrain, wCycle, wEnqueue, wBacklog, wRecovery, wCrash, wSorted} {
				if got := applies(s, w); got != slices.Contains(only, w) {
					t.Errorf("takes part in %s: %v, want %v", w, got, !got)
				}
			}
		})
	}
	if len(want) > 0 {
		t.Errorf("systems missing: %v", want)
	}
}
