package queue_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/walq/walq/queue"
)

// BenchmarkEnqueue measures durable enqueues per second by producer count
// and sync mode, 100-byte payloads.
func BenchmarkEnqueue(b *testing.B) {
	for _, mode := range []struct {
		name string
		sync queue.SyncMode
	}{{"always", queue.SyncAlways}, {"never", queue.SyncNever}} {
		for _, producers := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/producers=%d", mode.name, producers), func(b *testing.B) {
				q, err := queue.Open(b.TempDir(), &queue.Options{Sync: mode.sync})
				if err != nil {
					b.Fatal(err)
				}
				defer q.Close()
				payload := make([]byte, 100)
				b.SetParallelism(max(1, producers/ncpu()))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := q.Enqueue(context.Background(), payload); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}

// BenchmarkCycle measures enqueue+dequeue+ack cycles per second with
// concurrent producers and consumers.
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
			payload := make([]byte, 100)
			ctx := context.Background()
			b.SetParallelism(4)
			b.ResetTimer()
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
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
		})
	}
}
