package queue_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/walq/walq/queue"
)

// lockBenchBacklog is how many messages or values the loaded cases of
// BenchmarkWriteUnderHousekeeping hold.
const lockBenchBacklog = 1_000_000

// lockBenchInterval is the schedule of the measured writes: one every
// interval, whatever the previous one took.
const lockBenchInterval = 500 * time.Microsecond

// BenchmarkWriteUnderHousekeeping measures the latency of single writes
// (Enqueue; Publish on a sorted queue) while another goroutine runs
// snapshots (Compact) and Stats back to back, with an empty queue and with
// a backlog of a million delayed messages or pending sorted values. Work
// under the queue's lock that grows with the backlog shows as a p99 that
// grows with it. The writes are issued on a fixed schedule and each
// latency is counted from its scheduled start, so a write stalled behind
// the lock delays the ones scheduled after it too (no coordinated
// omission). Run it with a fixed count, e.g.
//
//	go test ./queue -run '^$' -bench WriteUnderHousekeeping -benchtime 10000x
//
// It reports p50, p99 and the maximum in nanoseconds, and the snapshots
// taken.
func BenchmarkWriteUnderHousekeeping(b *testing.B) {
	cases := []struct {
		name string
		open func(b *testing.B) (write func() error, house func() error, done func())
	}{
		{"enqueue/backlog=none", openLockBenchQueue(0)},
		{"enqueue/backlog=1M-delayed", openLockBenchQueue(lockBenchBacklog)},
		{"publish/backlog=none", openLockBenchSorted(0)},
		{"publish/backlog=1M-sorted", openLockBenchSorted(lockBenchBacklog)},
	}
	for _, c := range cases {
		// The backlog is built once per case; b.Run calls the function
		// more than once.
		write, house, done := c.open(b)
		b.Run(c.name, func(b *testing.B) { runUnderHousekeeping(b, write, house) })
		done()
	}
}

// runUnderHousekeeping runs b.N scheduled writes while house runs in a
// loop, and reports the latency percentiles.
func runUnderHousekeeping(b *testing.B, write, house func() error) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var snaps int
	var houseErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if houseErr = house(); houseErr != nil {
				return
			}
			snaps++
		}
	}()
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		at := start.Add(time.Duration(i) * lockBenchInterval)
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		if err := write(); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(at)
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	if houseErr != nil {
		b.Fatal(houseErr)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "max-ns")
	b.ReportMetric(float64(snaps), "snapshots")
}

func lockBenchOptions() queue.Options {
	// SyncNever: the write's own latency is small, so what it waits for
	// under the lock is what shows.
	return queue.Options{Sync: queue.SyncNever, SegmentSize: 64 << 20, SnapshotBytes: 1 << 40}
}

// openLockBenchQueue returns a case on an ack queue holding n messages
// delayed by a day.
func openLockBenchQueue(n int) func(b *testing.B) (func() error, func() error, func()) {
	return func(b *testing.B) (func() error, func() error, func()) {
		q := openDelayed(b, n)
		ctx := context.Background()
		payload := make([]byte, 16)
		write := func() error { _, err := q.Enqueue(ctx, payload); return err }
		house := func() error {
			q.Stats()
			return q.Compact()
		}
		return write, house, func() { closeBench(b, q.Close) }
	}
}

// openDelayed opens an ack queue holding n messages delayed by a day.
func openDelayed(b *testing.B, n int) *queue.Queue {
	o := lockBenchOptions()
	q, err := queue.Open(b.TempDir(), &o)
	if err != nil {
		b.Fatal(err)
	}
	items := make([]queue.Item, 1000)
	for i := range items {
		items[i] = queue.Item{Payload: make([]byte, 16), Delay: 24 * time.Hour}
	}
	for left := n; left > 0; left -= len(items) {
		if _, err := q.EnqueueBatch(context.Background(), items[:min(left, len(items))]); err != nil {
			b.Fatal(err)
		}
	}
	return q
}

// openLockBenchSorted returns a case on a sorted queue holding n pending
// values under n/10 keys.
func openLockBenchSorted(n int) func(b *testing.B) (func() error, func() error, func()) {
	return func(b *testing.B) (func() error, func() error, func()) {
		o := lockBenchOptions()
		s, err := queue.OpenSorted[int64](b.TempDir(), &queue.SortedOptions{Options: o})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		payload := make([]byte, 16)
		for i := range n {
			if err := s.Publish(ctx, int64(i), fmt.Sprintf("k%d", i%(n/10)), payload); err != nil {
				b.Fatal(err)
			}
		}
		i := int64(n)
		write := func() error { i++; return s.Publish(ctx, i, "measured", payload) }
		house := func() error {
			s.Stats()
			return s.Compact()
		}
		return write, house, func() { closeBench(b, s.Close) }
	}
}

func closeBench(b *testing.B, closeFn func() error) {
	if err := closeFn(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStats measures one Stats call, which takes the queue's lock
// for its counts and minima, with an empty queue and with a million
// delayed messages.
func BenchmarkStats(b *testing.B) {
	for _, n := range []int{0, lockBenchBacklog} {
		q := openDelayed(b, n)
		b.Run(fmt.Sprintf("delayed=%d", n), func(b *testing.B) {
			for range b.N {
				q.Stats()
			}
		})
		closeBench(b, q.Close)
	}
}
