package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The Go benchmarks compare walq with the lower bounds in one run, in a form
// benchstat reads:
//
//	go test -run '^$' -bench . -count 6 > new.txt && benchstat new.txt
//
// Each reports ops/s besides ns/op. Every op is a 100-byte message.

const benchPayload = 100

// benchSystem returns the named system.
func benchSystem(b *testing.B, name string) System {
	b.Helper()
	for _, s := range allSystems() {
		if s.Name == name {
			return s
		}
	}
	b.Fatalf("no system %s", name)
	return System{}
}

// benchName turns "walq/always" into "walq-always", so that benchstat keeps
// the system as one name component.
func benchName(s string) string { return strings.ReplaceAll(s, "/", "-") }

// BenchmarkDurableEnqueue: durable enqueues with 1 and 64 producers: walq
// SyncAlways, walq's streaming API (EnqueueAsync, each producer ending with
// a Flush inside the timing), the bare append+fdatasync loop and the bare
// tidwall/wal WriteBatch+Sync group-commit prototype.
func BenchmarkDurableEnqueue(b *testing.B) {
	for _, name := range []string{"walq/always", "walq/stream", "fsync/loop", "tidwall/group"} {
		for _, producers := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/producers=%d", benchName(name), producers), func(b *testing.B) {
				benchEnqueue(b, benchSystem(b, name), producers)
			})
		}
	}
}

func benchEnqueue(b *testing.B, s System, producers int) {
	q, err := s.Open(b.TempDir(), Hint{Producers: producers, Payload: benchPayload})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	var (
		never atomic.Bool
		errs  errorLog
	)
	b.ResetTimer()
	prod := produce(context.Background(), q, producers, b.N, benchPayload, &never, &errs)
	b.StopTimer()
	if e := errs.list(); len(e) > 0 {
		b.Fatal(e)
	}
	b.ReportMetric(float64(prod.total())/prod.elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(prod.lat.quantile(0.99).Microseconds()), "p99-µs")
}

// BenchmarkFullCycle: 4 producers and 4 consumers at once, each message
// enqueued, dequeued and acked, under SyncAlways, with the streaming API
// (EnqueueAsync; DequeueBatch and SettleAsync) and under SyncNever, with
// one call per message and with the streaming API. The
// harness checks every message; a lost one fails the benchmark.
func BenchmarkFullCycle(b *testing.B) {
	for _, name := range []string{"walq/always", "walq/stream", "walq/never", "walq/never-stream"} {
		b.Run(benchName(name), func(b *testing.B) {
			s := benchSystem(b, name)
			c := cell{Workload: wCycle, Payload: benchPayload, Producers: 4, Consumers: 4}
			dir := b.TempDir()
			q, err := s.Open(dir, c.hint())
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			b.ResetTimer()
			out := runCycle(context.Background(), q, s, dir, c, runOpts{N: b.N, Cap: time.Hour, Idle: 10 * time.Second})
			b.StopTimer()
			if e := allErrors(out); e != "" {
				b.Fatal(e)
			}
			b.ReportMetric(out[0].opsPerSec(), "ops/s")
		})
	}
}
