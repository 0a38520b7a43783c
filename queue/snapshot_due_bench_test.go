package queue_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// BenchmarkSnapshotBytes measures what a SnapshotBytes below SegmentSize
// costs a producer and a consumer: b.N enqueues, then b.N dequeues and
// acks, without fsync, 100-byte payloads (WALQ_BENCH_PAYLOAD if set), with
// the snapshots the background compaction wrote reported per run. Each
// snapshot holds every live message, so its cost grows with the backlog,
// not with SnapshotBytes.
func BenchmarkSnapshotBytes(b *testing.B) {
	for _, size := range []int64{64 << 10, 1 << 20, 0} {
		name := "default"
		if size > 0 {
			name = fmt.Sprintf("%dKiB", size>>10)
		}
		b.Run(name, func(b *testing.B) {
			var snapshots atomic.Int64
			o := queue.Options{Sync: queue.SyncNever, SnapshotBytes: size}
			testhook.SetSnapshotStep(&o, func(step string) {
				if step == "written" {
					snapshots.Add(1)
				}
			})
			q, payload, cpu := openTimed(b, &o)
			defer closeTimed(b, q)
			for range b.N {
				if _, err := q.Enqueue(context.Background(), payload); err != nil {
					b.Fatal(err)
				}
			}
			for range b.N {
				if err := dequeueAck(q); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
			b.ReportMetric(float64(snapshots.Load()), "snapshots")
		})
	}
}

// dequeueAck takes the next message and acks it.
func dequeueAck(q *queue.Queue) error {
	m, err := q.Dequeue(context.Background())
	if err != nil {
		return err
	}
	return q.Ack(m.Receipt)
}
