package queue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walq/walq/queue"
)

// openTimed opens a queue with o in a temporary directory and starts the
// measure: it returns the queue, a payload of benchPayload bytes and the
// process's CPU time (for reportCPU), after resetting the timer with
// allocations reported. The caller defers closeTimed: the queue's Close
// (its last snapshot and fsync) is part of the timed run, which a
// b.Cleanup, run after the timer stops, would leave out.
func openTimed(b *testing.B, o *queue.Options) (*queue.Queue, []byte, int64) {
	b.Helper()
	q, err := queue.Open(b.TempDir(), o)
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, benchPayload())
	b.ReportAllocs()
	b.ResetTimer()
	return q, payload, processCPU()
}

// closeTimed closes a queue of openTimed, within the timed run.
func closeTimed(b *testing.B, q *queue.Queue) {
	if err := q.Close(); err != nil {
		b.Error(err)
	}
}

// openBench opens a queue with o in a temporary directory, closed when the
// benchmark function returns.
func openBench(b *testing.B, o *queue.Options) *queue.Queue {
	b.Helper()
	q, err := queue.Open(b.TempDir(), o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := q.Close(); err != nil {
			b.Error(err)
		}
	})
	return q
}

// BenchmarkEnqueue measures durable enqueues per second by producer count
// and sync mode, and the process's CPU time per enqueue beside the wall
// time; 100-byte payloads, WALQ_BENCH_PAYLOAD if set (bench/'s 1 KiB rows:
// 1024). Under SyncNever the gap between the two is mostly the fsync each
// segment roll makes while its caller waits.
func BenchmarkEnqueue(b *testing.B) {
	for _, mode := range []struct {
		name string
		sync queue.SyncMode
	}{{"always", queue.SyncAlways}, {"never", queue.SyncNever}} {
		for _, producers := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/producers=%d", mode.name, producers), func(b *testing.B) {
				q, payload, cpu := openTimed(b, &queue.Options{Sync: mode.sync})
				defer closeTimed(b, q)
				if producers == 1 {
					for range b.N {
						if _, err := q.Enqueue(context.Background(), payload); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					b.SetParallelism(max(1, producers/ncpu()))
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if _, err := q.Enqueue(context.Background(), payload); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				reportCPU(b, cpu)
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}

// BenchmarkCycle measures enqueue+dequeue+ack cycles per second with
// concurrent producers and consumers, and the process's CPU time per
// cycle beside the wall time; 100-byte payloads, WALQ_BENCH_PAYLOAD if
// set.
func BenchmarkCycle(b *testing.B) {
	for _, mode := range []struct {
		name string
		sync queue.SyncMode
	}{{"always", queue.SyncAlways}, {"never", queue.SyncNever}} {
		b.Run(mode.name, func(b *testing.B) {
			q, err := queue.Open(b.TempDir(), &queue.Options{Sync: mode.sync})
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			payload := make([]byte, benchPayload())
			ctx := context.Background()
			b.SetParallelism(4)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := q.Enqueue(ctx, payload); err != nil {
						b.Error(err)
						return
					}
					m, err := q.Dequeue(ctx)
					if err == nil {
						err = m.Ack()
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportCPU(b, cpu)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
		})
	}
}

// BenchmarkCycleSplit is the 4 + 4 cycle of bench/ with producers and
// consumers apart: producers enqueue b.N messages between them while 4
// other goroutines dequeue and ack until all b.N are acked; 100-byte
// payloads, WALQ_BENCH_PAYLOAD if set. Unlike BenchmarkCycle, a producer
// never waits for a consumer's turn at the queue, consumers wait for
// producers and a backlog may grow, so it shows how long a consumer holds
// the queue's lock (in the producers' rate), the lock's hand-offs and the
// wake-ups of blocked consumers. producers=4 is bench/'s no-fsync cycle
// row; producers=1 the same with one producer (the consumers are mostly
// waiting); sync=always is producers=4 under SyncAlways, where each
// enqueue waits for an fsync. deq-p50-µs and deq-p99-µs are the
// consumers' Dequeue calls (a lease waits for its write only).
func BenchmarkCycleSplit(b *testing.B) {
	for _, run := range []struct {
		name      string
		sync      queue.SyncMode
		producers int
	}{{"producers=4", queue.SyncNever, 4}, {"producers=1", queue.SyncNever, 1}, {"sync=always", queue.SyncAlways, 4}} {
		b.Run(run.name, func(b *testing.B) {
			cycleSplit(b, run.sync, run.producers, 4)
		})
	}
}

// cycleSplit runs BenchmarkCycleSplit with the given sync mode and
// goroutine counts.
func cycleSplit(b *testing.B, mode queue.SyncMode, producers, consumers int) {
	q, err := queue.Open(b.TempDir(), &queue.Options{Sync: mode})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	payload := make([]byte, benchPayload())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var left sync.WaitGroup
	var acked atomic.Int64
	all := make(chan struct{}) // closed by the consumer whose ack is the b.N-th
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for p := range producers {
		left.Add(1)
		go func() {
			defer left.Done()
			for range b.N/producers + boolInt(p < b.N%producers) {
				if _, err := q.Enqueue(ctx, payload); err != nil {
					b.Error(err)
					cancel() // the consumers would wait for it forever
					return
				}
			}
		}()
	}
	lats := make([][]time.Duration, consumers) // each consumer's Dequeue calls
	for i := range consumers {
		left.Add(1)
		go func() {
			defer left.Done()
			for {
				start := time.Now()
				m, err := q.Dequeue(ctx)
				if errors.Is(err, context.Canceled) {
					return
				}
				lats[i] = append(lats[i], time.Since(start))
				if err == nil {
					err = m.Ack()
				}
				if err != nil {
					b.Error(err)
					cancel()
					return
				}
				if acked.Add(1) == int64(b.N) {
					close(all)
				}
			}
		}()
	}
	select {
	case <-all:
	case <-ctx.Done(): // a call failed: what it left out is never acked
	}
	b.StopTimer()
	cancel()
	left.Wait()
	reportCPU(b, cpu)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
	ds := slices.Concat(lats...)
	slices.Sort(ds)
	if n := len(ds); n > 0 {
		b.ReportMetric(float64(ds[n/2].Microseconds()), "deq-p50-µs")
		b.ReportMetric(float64(ds[n*99/100].Microseconds()), "deq-p99-µs")
	}
}

// boolInt is 1 for true, 0 for false.
func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

// BenchmarkSorted publishes WALQ_SORTED_VALUES values (default 100,000;
// the README's figure uses 1,000,000) over 10,000 keys from 16 publishers,
// then pulls batches of about 100 values and acks them all, and reports
// values/s for each phase and the process's peak RSS. Run it with
// -benchtime 1x.
func BenchmarkSorted(b *testing.B) {
	values := 100_000
	if s := os.Getenv("WALQ_SORTED_VALUES"); s != "" {
		fmt.Sscan(s, &values)
	}
	for _, mode := range []struct {
		name string
		sync queue.SyncMode
	}{{"never", queue.SyncNever}, {"always", queue.SyncAlways}} {
		b.Run(mode.name, func(b *testing.B) {
			for range b.N {
				publish, pull := sortedRun(b, mode.sync, values, 10_000, 16)
				b.ReportMetric(publish, "published/s")
				b.ReportMetric(pull, "pulled+acked/s")
			}
			b.ReportMetric(float64(peakRSS())/(1<<20), "peak-RSS-MiB")
		})
	}
}

func sortedRun(b *testing.B, mode queue.SyncMode, values, keys, publishers int) (float64, float64) {
	sq, err := queue.OpenSorted[int64](b.TempDir(), &queue.SortedOptions{Options: queue.Options{Sync: mode}})
	if err != nil {
		b.Fatal(err)
	}
	defer sq.Close()
	ctx := context.Background()
	payload := make([]byte, 100)
	start := time.Now()
	var wg sync.WaitGroup
	for p := range publishers {
		spawn(&wg, func() {
			for i := p; i < values; i += publishers {
				if err := sq.Publish(ctx, int64(i), fmt.Sprint("key-", i%keys), payload); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	published := float64(values) / time.Since(start).Seconds()
	start = time.Now()
	for got := 0; got < values; {
		bs, err := sq.TryPull(100)
		if err != nil {
			b.Fatal(err)
		}
		for _, bt := range bs {
			got += len(bt.Values)
			if err := bt.Ack(); err != nil {
				b.Fatal(err)
			}
		}
	}
	return published, float64(values) / time.Since(start).Seconds()
}

// peakRSS returns the process's peak resident set size in bytes (Linux).
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var n int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), &n)
			return n << 10
		}
	}
	return 0
}

// BenchmarkSteady measures one operation at a time in steady state,
// without fsync, 100-byte payloads (WALQ_BENCH_PAYLOAD bytes if set), one
// goroutine: enqueue into a queue that already holds a backlog, dequeue
// from a backlog of b.N messages, and ack b.N leased messages. Run with
// -benchmem for allocs/op.
func BenchmarkSteady(b *testing.B) {
	ctx := context.Background()
	payload := make([]byte, benchPayload())
	open := func(b *testing.B, backlog int) *queue.Queue {
		b.Helper()
		q, err := queue.Open(b.TempDir(), &queue.Options{Sync: queue.SyncNever})
		if err != nil {
			b.Fatal(err)
		}
		for range backlog {
			if _, err := q.Enqueue(ctx, payload); err != nil {
				b.Fatal(err)
			}
		}
		return q
	}
	b.Run("enqueue", func(b *testing.B) {
		q := open(b, 1000)
		defer q.Close()
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := q.Enqueue(ctx, payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("dequeue", func(b *testing.B) {
		q := open(b, b.N)
		defer q.Close()
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := q.Dequeue(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ack", func(b *testing.B) {
		q := open(b, b.N)
		defer q.Close()
		ms := make([]*queue.Message, b.N)
		for i := range ms {
			m, err := q.Dequeue(ctx)
			if err != nil {
				b.Fatal(err)
			}
			ms[i] = m
		}
		b.ReportAllocs()
		b.ResetTimer()
		for _, m := range ms {
			if err := m.Ack(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDrain measures one consumer draining a backlog of b.N messages
// with Dequeue and Ack, without fsync, 100-byte payloads: the no-fsync
// dequeue + ack row of bench/. Run with -benchmem for allocs/op.
func BenchmarkDrain(b *testing.B) {
	ctx := context.Background()
	q, err := queue.Open(b.TempDir(), &queue.Options{Sync: queue.SyncNever})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	items := make([]queue.Item, 1000)
	for i := range items {
		items[i] = queue.Item{Payload: make([]byte, 100)}
	}
	for n := 0; n < b.N; n += len(items) {
		if _, err := q.EnqueueBatch(ctx, items[:min(len(items), b.N-n)]); err != nil {
			b.Fatal(err)
		}
	}
	drainTimed(b, q)
}

// BenchmarkDrainSingles is BenchmarkDrain over a backlog enqueued one
// message at a time, as bench/'s drain workload makes it: one log entry
// per message, most of them in sealed segments, so the cursor checks and
// frames an entry per delivery. Payloads of 100 bytes, WALQ_BENCH_PAYLOAD
// if set.
func BenchmarkDrainSingles(b *testing.B) {
	q := singlesBacklog(b)
	drainTimed(b, q)
}

// singlesBacklog opens a SyncNever queue holding b.N messages enqueued
// one at a time (payloads of benchPayload bytes), closed when b ends.
func singlesBacklog(b *testing.B) *queue.Queue {
	ctx := context.Background()
	q := openBench(b, &queue.Options{Sync: queue.SyncNever})
	payload := make([]byte, benchPayload())
	for range b.N {
		if _, err := q.Enqueue(ctx, payload); err != nil {
			b.Fatal(err)
		}
	}
	return q
}

// BenchmarkDrainAckAsync is BenchmarkDrainSingles with AckAsync for Ack:
// the consumer does not wait for its ack's write, which the next
// delivery's write (or the committer) covers, and the timed run ends with
// a Flush that waits for every ack.
func BenchmarkDrainAckAsync(b *testing.B) {
	ctx := context.Background()
	q := singlesBacklog(b)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	counted := countSyscalls(b)
	for range b.N {
		m, err := q.Dequeue(ctx)
		if err == nil {
			_, err = m.AckAsync()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := q.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	counted()
	reportCPU(b, cpu)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkDrainWrites is the floor under BenchmarkDrainSingles: the
// write calls that one consumer's Dequeue and Ack make at the least under
// SyncNever, where each returns once its record is written (a lease
// record of 90 bytes and an ack record of 50, about their size with the
// entry's framing), appended to one file, and nothing else. Compare its
// msgs/s and cpu-ns/op with BenchmarkDrainSingles' in the same run.
func BenchmarkDrainWrites(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	lease, ack := make([]byte, 90), make([]byte, 50)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for range b.N {
		if _, err := f.Write(lease); err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(ack); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// benchPayload returns the payload size of the per-call benchmarks: 100
// bytes, or WALQ_BENCH_PAYLOAD (bench/'s 1 KiB rows: 1024).
func benchPayload() int {
	n := 100
	if s := os.Getenv("WALQ_BENCH_PAYLOAD"); s != "" {
		fmt.Sscan(s, &n)
	}
	return n
}

// drainTimed times one consumer taking b.N messages from q with Dequeue
// and Ack, and reports allocations, CPU and messages per second.
func drainTimed(b *testing.B, q *queue.Queue) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	counted := countSyscalls(b)
	for range b.N {
		m, err := q.Dequeue(ctx)
		if err == nil {
			err = m.Ack()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	counted()
	reportCPU(b, cpu)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkTryDequeueEmpty measures a delivery that finds nothing, the
// look a polling consumer makes on an empty queue: it also asks whether
// the log is poisoned.
func BenchmarkTryDequeueEmpty(b *testing.B) {
	q, err := queue.Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := q.TryDequeue(); !errors.Is(err, queue.ErrEmpty) {
			b.Fatal(err)
		}
	}
}
