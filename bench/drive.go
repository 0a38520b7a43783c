package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// This file holds the goroutines every workload is made of: producers that
// enqueue numbered payloads, and consumers that dequeue, check and ack them.

// errorLog gathers the errors of many goroutines: the first few verbatim,
// the rest counted.
type errorLog struct {
	mu    sync.Mutex
	first []string // at most errorLogKeep distinct messages; guarded by mu
	more  int      // errors not kept; guarded by mu
}

const errorLogKeep = 3

func (l *errorLog) add(where string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	msg := fmt.Sprintf("%s: %v", where, err)
	for _, m := range l.first {
		if m == msg {
			l.more++
			return
		}
	}
	if len(l.first) < errorLogKeep {
		l.first = append(l.first, msg)
		return
	}
	l.more++
}

func (l *errorLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]string(nil), l.first...)
	if l.more > 0 {
		out = append(out, fmt.Sprintf("(+%d more errors)", l.more))
	}
	return out
}

// produced is what producers report.
type produced struct {
	counts  []int64 // messages each producer enqueued successfully
	lat     hist    // latency of each Enqueue call
	elapsed time.Duration
}

func (p *produced) total() int64 {
	var n int64
	for _, c := range p.counts {
		n += c
	}
	return n
}

// produce runs producers goroutines that enqueue up to n messages of size
// bytes between them (producer p sends share(n, producers, p)) until stop is
// set. A producer stops at its first error.
func produce(ctx context.Context, q Queue, producers, n, size int, stop *atomic.Bool, errs *errorLog) *produced {
	out := &produced{counts: make([]int64, producers)}
	lats := make([]hist, producers)
	var wg sync.WaitGroup
	start := time.Now()
	for p := range producers {
		wg.Go(func() {
			buf := make([]byte, size)
			per := share(n, producers, p)
			for seq := 0; seq < per && !stop.Load(); seq++ {
				encodePayload(buf, p, uint64(seq))
				t0 := time.Now()
				err := q.Enqueue(ctx, buf)
				lats[p].record(time.Since(t0))
				if err != nil {
					errs.add("enqueue", err)
					return
				}
				out.counts[p]++
			}
			if f, ok := q.(flusher); ok {
				if err := f.Flush(ctx); err != nil {
					errs.add("flush", err)
				}
			}
		})
	}
	wg.Wait()
	out.elapsed = time.Since(start)
	for i := range lats {
		out.lat.merge(&lats[i])
	}
	return out
}

// share is producer p's part of n messages split among producers; no part
// exceeds perProducer(n, producers).
func share(n, producers, p int) int {
	if p < n%producers {
		return n/producers + 1
	}
	return n / producers
}

// progress tells consumers when to stop: once as many messages were consumed
// as were produced (known only when the producers are done), or when no
// message came for idle after that.
type progress struct {
	consumed atomic.Int64
	target   atomic.Int64 // math.MaxInt64 until setTarget
	cancel   context.CancelFunc
	idle     time.Duration
	stalled  atomic.Bool // the watchdog gave up waiting
}

func newProgress(cancel context.CancelFunc, idle time.Duration) *progress {
	p := &progress{cancel: cancel, idle: idle}
	p.target.Store(math.MaxInt64)
	return p
}

func (p *progress) one() {
	if p.consumed.Add(1) >= p.target.Load() {
		p.cancel()
	}
}

// setTarget is called once the producers are done.
func (p *progress) setTarget(n int64) {
	p.target.Store(n)
	if p.consumed.Load() >= n {
		p.cancel()
	}
}

// watch cancels the consumers when, after setTarget, no message arrives for
// p.idle: the rest was lost. It returns when ctx ends.
func (p *progress) watch(ctx context.Context) {
	tick := time.NewTicker(min(p.idle/4, 100*time.Millisecond))
	defer tick.Stop()
	last, since := p.consumed.Load(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if n := p.consumed.Load(); n != last || p.target.Load() == math.MaxInt64 {
				last, since = n, now
			} else if now.Sub(since) >= p.idle {
				p.stalled.Store(true)
				p.cancel()
				return
			}
		}
	}
}

// consumed is what consumers report.
type consumed struct {
	lat     hist // dequeue+ack call time, or end-to-end age (see consume)
	elapsed time.Duration
}

// consume runs consumers goroutines that dequeue, check and ack until ctx
// ends (progress cancels it when done). With endToEnd the latency recorded
// is each message's age at delivery, otherwise the time of Dequeue plus Ack.
func consume(ctx context.Context, q Queue, consumers int, chk *checker, prog *progress,
	endToEnd bool, errs *errorLog) *consumed {
	out := &consumed{}
	lats := make([]hist, consumers)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range consumers {
		wg.Go(func() { consumeOne(ctx, q, chk.view(), prog, endToEnd, &lats[i], errs) })
	}
	wg.Wait()
	out.elapsed = time.Since(start)
	for i := range lats {
		out.lat.merge(&lats[i])
	}
	return out
}

func consumeOne(ctx context.Context, q Queue, v *view, prog *progress, endToEnd bool, lat *hist, errs *errorLog) {
	c, err := q.NewConsumer()
	if err != nil {
		errs.add("consumer", err)
		return
	}
	defer func() {
		if err := c.Close(); err != nil {
			errs.add("consumer close", err)
		}
	}()
	for ctx.Err() == nil {
		t0 := time.Now()
		d, err := c.Dequeue(ctx)
		if err != nil {
			if ctx.Err() == nil {
				errs.add("dequeue", err)
			}
			return
		}
		age := v.check(d.Payload())
		if err := d.Ack(); err != nil {
			errs.add("ack", err)
		}
		if endToEnd {
			lat.record(age)
		} else {
			lat.record(time.Since(t0))
		}
		prog.one()
	}
}

// drainAll consumes exactly want messages with consumers goroutines, giving
// up after idle without a message.
func drainAll(ctx context.Context, q Queue, consumers int, chk *checker, want int64,
	idle time.Duration, errs *errorLog) *consumed {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	prog := newProgress(cancel, idle)
	prog.setTarget(want)
	go prog.watch(ctx)
	if want == 0 {
		return &consumed{}
	}
	out := consume(ctx, q, consumers, chk, prog, false, errs)
	if prog.stalled.Load() {
		errs.add("drain", fmt.Errorf("no message for %v after %d of %d", idle, prog.consumed.Load(), want))
	}
	return out
}
