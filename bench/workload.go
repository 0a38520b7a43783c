package main

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// Workload names, as -workloads takes them.
const (
	wDrain    = "drain"    // enqueue N (1 producer), then drain with acks (1 consumer)
	wCycle    = "cycle"    // 4 producers + 4 consumers at once: enqueue, dequeue, ack
	wEnqueue  = "enqueue"  // durable enqueue at 1, 64, 256 producers (-producers)
	wBacklog  = "backlog"  // grow a backlog to -backlog bytes, sample RSS and disk, drain
	wRecovery = "recovery" // time to open a store holding a log of a given size
	wSorted   = "sorted"   // walq's sorted queue: publish with keys, pull in key order
	wCrash    = "crash"    // time to open a store whose process was killed (kill -9)
)

var allWorkloads = []string{wDrain, wCycle, wEnqueue, wBacklog, wRecovery, wSorted, wCrash}

// cell is one point of the matrix: every selected system runs it, in
// alternating rounds.
type cell struct {
	Workload  string
	Payload   int   // bytes per message
	Producers int   // goroutines enqueuing
	Consumers int   // goroutines dequeuing
	Size      int64 // backlog or log bytes, for backlog and recovery
}

// hint tells adapters how many goroutines call at once: in the drain
// workload the consumer starts after the producer is done.
func (c cell) hint() Hint {
	if c.Workload == wDrain {
		return Hint{Producers: c.Producers, Payload: c.Payload}
	}
	return Hint{Producers: c.Producers, Consumers: c.Consumers, Payload: c.Payload}
}

func (c cell) String() string {
	s := fmt.Sprintf("%s %s %dp/%dc", c.Workload, sizeString(int64(c.Payload)), c.Producers, c.Consumers)
	if c.Size > 0 {
		s += " " + sizeString(c.Size)
	}
	return s
}

// runOpts are the limits every run shares.
type runOpts struct {
	N    int           // most messages one run enqueues
	Cap  time.Duration // most time the producers of one run enqueue
	Idle time.Duration // consumers give up after this long without a message
}

// sample is what one run of one system measured in one phase.
type sample struct {
	Phase   string // "" for single-phase workloads; "enqueue"/"dequeue" for drain
	Ops     int64  // messages through the phase
	Elapsed time.Duration
	P50     time.Duration // median per-op latency; 0 when not measured
	P99     time.Duration // 99th percentile per-op latency; 0 when not measured
	RSS     int64         // peak resident bytes; 0 when not measured
	AnonRSS int64         // peak anonymous resident bytes (RssAnon: no file pages, so no mmapped store); 0 when not measured
	Disk    int64         // bytes allocated on disk at the end of the phase; -1 when not measured
	Open    time.Duration // time to open the store (recovery)
	Curve   []point       // RSS and disk over time (backlog growth and drain)
	Note    string        // what the system reported about the phase (crash: what walq replayed)
	Errors  []string
}

// withLat sets the sample's latency quantiles from h.
func (s sample) withLat(h *hist) sample {
	s.P50, s.P99 = h.quantile(0.50), h.quantile(0.99)
	return s
}

func (s sample) opsPerSec() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Ops) / s.Elapsed.Seconds()
}

// applies reports whether a system takes part in a workload.
func applies(s System, workload string) bool {
	if s.Workloads != nil && !slices.Contains(s.Workloads, workload) {
		return false
	}
	switch workload {
	case wDrain:
		return s.Kind == KindQueue || !s.Durable // a lower bound without fsync: the enqueue phase
	case wCycle:
		return s.Kind == KindQueue
	case wEnqueue:
		return s.Durable
	case wBacklog, wRecovery, wCrash:
		return s.Kind == KindQueue && s.Bulk
	case wSorted:
		return s.Family == "walq" && s.Mode != "interval" && s.Mode != "stream"
	}
	return false
}

// stopAfter returns a flag that is set after d.
func stopAfter(d time.Duration) (*atomic.Bool, func() bool) {
	var stop atomic.Bool
	t := time.AfterFunc(d, func() { stop.Store(true) })
	return &stop, t.Stop
}

func perProducer(n, producers int) int { return max(1, (n+producers-1)/producers) }

// runDrain enqueues with one producer, then drains with one consumer.
func runDrain(ctx context.Context, q Queue, s System, dir string, c cell, o runOpts) []sample {
	var errs errorLog
	stop, cancel := stopAfter(o.Cap)
	defer cancel()
	prod := produce(ctx, q, 1, o.N, c.Payload, stop, &errs)
	enq := sample{Phase: "enqueue", Ops: prod.total(), Elapsed: prod.elapsed,
		Disk: diskUsage(dir), Errors: errs.list()}.withLat(&prod.lat)
	if s.Kind == KindLog { // no consumer: read the log back, untimed
		chk := newChecker(1, o.N, c.Payload, s.FIFO)
		chk.expect(prod.counts)
		if sc, ok := q.(scanner); ok {
			v := chk.view()
			if err := sc.Scan(func(p []byte) error { v.check(p); return nil }); err != nil {
				errs.add("scan", err)
			}
		}
		enq.Errors = append(errs.list(), chk.problems()...)
		return []sample{enq}
	}

	var derrs errorLog
	chk := newChecker(1, o.N, c.Payload, s.FIFO)
	chk.expect(prod.counts)
	cons := drainAll(ctx, q, 1, chk, prod.total(), o.Idle, &derrs)
	settle(ctx, q, &derrs)
	deq := sample{Phase: "dequeue", Ops: prod.total(), Elapsed: cons.elapsed,
		Disk: diskUsage(dir), Errors: append(derrs.list(), chk.problems()...)}.withLat(&cons.lat)
	return []sample{enq, deq}
}

// runCycle runs producers and consumers at once; a message counts when it
// has been enqueued, dequeued and acked, and its latency is its age when
// dequeued.
func runCycle(ctx context.Context, q Queue, s System, dir string, c cell, o runOpts) []sample {
	var errs errorLog
	per := perProducer(o.N, c.Producers)
	chk := newChecker(c.Producers, per, c.Payload, s.FIFO)
	cctx, cancelConsumers := context.WithCancel(ctx)
	defer cancelConsumers()
	prog := newProgress(cancelConsumers, o.Idle)
	go prog.watch(cctx)

	start := time.Now()
	done := make(chan *consumed)
	go func() { done <- consume(cctx, q, c.Consumers, chk, prog, true, &errs) }()
	stop, cancel := stopAfter(o.Cap)
	defer cancel()
	prod := produce(ctx, q, c.Producers, o.N, c.Payload, stop, &errs)
	chk.expect(prod.counts)
	prog.setTarget(prod.total())
	cons := <-done
	elapsed := time.Since(start)
	if prog.stalled.Load() {
		errs.add("cycle", fmt.Errorf("no message for %v after %d of %d", o.Idle, prog.consumed.Load(), prod.total()))
	}
	settle(ctx, q, &errs)
	return []sample{sample{Ops: prog.consumed.Load(), Elapsed: elapsed, Disk: diskUsage(dir),
		Errors: append(errs.list(), chk.problems()...)}.withLat(&cons.lat)}
}

// runEnqueue measures durable enqueues alone, then closes the store and
// reads back what it holds, untimed: a scan where the system has one, else a
// drain through its Reader.
func runEnqueue(ctx context.Context, s System, dir string, c cell, o runOpts) []sample {
	q, err := s.Open(dir, c.hint())
	if err != nil {
		return []sample{{Disk: -1, Errors: []string{fmt.Sprintf("open: %v", err)}}}
	}
	var errs errorLog
	stop, cancel := stopAfter(o.Cap)
	defer cancel()
	prod := produce(ctx, q, c.Producers, o.N, c.Payload, stop, &errs)
	out := sample{Ops: prod.total(), Elapsed: prod.elapsed, Disk: diskUsage(dir)}.withLat(&prod.lat)
	if err := q.Close(); err != nil {
		errs.add("close", err)
	}
	chk := newChecker(c.Producers, perProducer(o.N, c.Producers), c.Payload, s.FIFO)
	chk.expect(prod.counts)
	readBack(ctx, s, dir, chk, prod.total(), o.Idle, &errs)
	out.Errors = append(errs.list(), chk.problems()...)
	return []sample{out}
}

// readBack opens a closed store with the system's Reader and checks the want
// messages it holds.
func readBack(ctx context.Context, s System, dir string, chk *checker, want int64, idle time.Duration, errs *errorLog) {
	r := readerOf(s)
	q, err := r.Open(dir, Hint{Consumers: verifyConsumers, Payload: chk.payload})
	if err != nil {
		errs.add("reopen", err)
		return
	}
	if sc, ok := q.(scanner); ok {
		v := chk.view()
		if err := sc.Scan(func(p []byte) error { v.check(p); return nil }); err != nil {
			errs.add("scan", err)
		}
	} else {
		drainAll(ctx, q, verifyConsumers, chk, want, idle, errs)
	}
	if err := q.Close(); err != nil {
		errs.add("reopen close", err)
	}
}

// readerOf returns the system that reads s's store.
func readerOf(s System) System {
	for _, r := range allSystems() {
		if r.Name == s.Reader {
			return r
		}
	}
	return s
}

// verifyConsumers drain a store to verify it when the drain is not timed.
const verifyConsumers = 8

// settle waits for asynchronous acks to be applied, where a system has them.
func settle(ctx context.Context, q Queue, errs *errorLog) {
	st, ok := q.(settler)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := st.Settle(ctx); err != nil {
		errs.add("settle", err)
	}
}
