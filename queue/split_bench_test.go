package queue_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/walq/walq/queue"
)

// BenchmarkSplit measures the 4 + 4 cycle of bench/ with producers and
// consumers apart: 4 goroutines enqueue b.N messages between them while 4
// others dequeue and ack them, 100-byte payloads. Unlike BenchmarkCycle,
// a producer never waits for a consumer's turn at the queue: how long a
// consumer holds the queue's lock shows in the producers' rate.
func BenchmarkSplit(b *testing.B) {
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
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU()
			splitRun(b, q, 4, 4)
			reportCPU(b, cpu)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// splitRun enqueues b.N messages from producers goroutines and dequeues
// and acks them from consumers goroutines.
func splitRun(b *testing.B, q *queue.Queue, producers, consumers int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	payload := make([]byte, 100)
	var sent, done atomic.Int64
	var wg sync.WaitGroup
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sent.Add(1) <= int64(b.N) {
				if _, err := q.Enqueue(ctx, payload); err != nil {
					b.Error(err)
					cancel()
					return
				}
			}
		}()
	}
	for range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := q.Dequeue(ctx)
				if err == nil {
					err = m.Ack()
				}
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					b.Error(err)
					cancel()
					return
				}
				if done.Add(1) == int64(b.N) {
					cancel() // the others are waiting in Dequeue
					return
				}
			}
		}()
	}
	wg.Wait()
}
