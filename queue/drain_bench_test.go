package queue_test

import (
	"context"
	"testing"

	"github.com/walq/walq/queue"
)

// BenchmarkDrainSingles is BenchmarkDrain over a backlog enqueued one
// message at a time, as bench/'s drain workload makes it: one log entry
// per message, most of them in sealed segments, so the cursor checks and
// frames an entry per delivery.
func BenchmarkDrainSingles(b *testing.B) {
	ctx := context.Background()
	q, err := queue.Open(b.TempDir(), &queue.Options{Sync: queue.SyncNever})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	payload := make([]byte, 100)
	for range b.N {
		if _, err := q.Enqueue(ctx, payload); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for range b.N {
		m, err := q.Dequeue(ctx)
		if err == nil {
			err = m.Ack()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
