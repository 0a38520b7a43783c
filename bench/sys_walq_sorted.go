package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/walq/walq/queue"
)

// runSorted publishes with sortedProducers goroutines, then pulls and acks
// everything with one puller; see sorted.go.
func runSorted(ctx context.Context, s System, dir string, c cell, o runOpts) []sample {
	var errs errorLog
	sq, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: walqOptions(s.Mode)})
	if err != nil {
		return []sample{{Phase: "publish", Disk: -1, Errors: []string{err.Error()}}}
	}
	pub, counts := publishSorted(ctx, sq, c, o, &errs)
	pub.Disk = diskUsage(dir)
	pull := pullSorted(ctx, sq, c, o, counts, &errs)
	if err := sq.Close(); err != nil {
		errs.add("close", err)
	}
	pull.Disk = diskUsage(dir)
	pull.Errors = append(errs.list(), pull.Errors...)
	return []sample{pub, pull}
}

// publishSorted publishes up to o.N values for at most o.Cap; it returns the
// phase's sample and how many values each producer published.
func publishSorted(ctx context.Context, sq *queue.Sorted[int64], c cell, o runOpts, errs *errorLog) (sample, []int64) {
	counts := make([]int64, sortedProducers)
	lats := make([]hist, sortedProducers)
	stop, cancel := stopAfter(o.Cap)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for p := range sortedProducers {
		wg.Go(func() {
			buf := make([]byte, c.Payload)
			for seq := uint64(0); seq < uint64(share(o.N, sortedProducers, p)) && !stop.Load(); seq++ {
				encodePayload(buf, p, seq)
				t0 := time.Now()
				err := sq.Publish(ctx, sortKeyOf(p, seq), strconv.Itoa(groupKeyOf(p, seq)), buf)
				lats[p].record(time.Since(t0))
				if err != nil {
					errs.add("publish", err)
					return
				}
				counts[p]++
			}
		})
	}
	wg.Wait()
	out := sample{Phase: "publish", Elapsed: time.Since(start)}
	var lat hist
	for i := range lats {
		lat.merge(&lats[i])
		out.Ops += counts[i]
	}
	return out.withLat(&lat), counts
}

// pullSorted pulls and acks until every published value came out, checking
// each payload, that its sort key is the one it was published with, and
// that batches come out in ascending order of their smallest sort key.
// Its latency is the time of one Pull plus the acks of its batches.
func pullSorted(ctx context.Context, sq *queue.Sorted[int64], c cell, o runOpts, counts []int64, errs *errorLog) sample {
	chk := newChecker(sortedProducers, perProducer(o.N, sortedProducers), c.Payload, false)
	chk.expect(counts)
	v := chk.view()
	var want, got, disorder, wrongKey int64
	for _, n := range counts {
		want += n
	}
	var lat hist
	prev := int64(-1 << 63)
	start := time.Now()
	for got < want {
		pctx, cancel := context.WithTimeout(ctx, o.Idle)
		t0 := time.Now()
		batches, err := sq.Pull(pctx, sortedPull)
		cancel()
		if err != nil {
			errs.add("pull", fmt.Errorf("after %d of %d values: %w", got, want, err))
			break
		}
		for _, b := range batches {
			low := int64(1<<63 - 1)
			for _, val := range b.Values {
				v.check(val.Payload)
				if p, seq, _, ok := decodePayload(val.Payload, c.Payload); ok && sortKeyOf(p, seq) != val.Sort {
					wrongKey++
				}
				low = min(low, val.Sort)
				got++
			}
			if low < prev {
				disorder++
			}
			prev = low
			if err := b.Ack(); err != nil {
				errs.add("ack", err)
			}
		}
		lat.record(time.Since(t0))
	}
	out := sample{Phase: "pull", Ops: got, Elapsed: time.Since(start)}.withLat(&lat)
	out.Errors = chk.problems()
	if disorder > 0 {
		out.Errors = append(out.Errors, fmt.Sprintf("batches out of sort order %d", disorder))
	}
	if wrongKey > 0 {
		out.Errors = append(out.Errors, fmt.Sprintf("wrong sort key %d", wrongKey))
	}
	return out
}
