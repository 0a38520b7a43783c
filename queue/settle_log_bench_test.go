package queue_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/walq/walq/queue"
)

// BenchmarkSettleLogBytes measures the log that delivering and acking
// costs: b.N messages enqueued (untimed), then one consumer dequeues and
// acks each, and the log's growth over that drain is reported per message
// (log-B/msg). No compaction runs in between (SnapshotBytes and the
// segment are larger than the run), so the growth is the lease and ack
// records alone: what a drain on a full disk needs, and what a backlog
// that is not copied forward keeps behind its cursor.
func BenchmarkSettleLogBytes(b *testing.B) {
	for _, size := range []int{100, 1024} {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			q, err := queue.Open(b.TempDir(), &queue.Options{SegmentSize: 1 << 30, SnapshotBytes: 1 << 40})
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			ctx := context.Background()
			payload := make([]byte, size)
			for range b.N {
				if _, err := q.Enqueue(ctx, payload); err != nil {
					b.Fatal(err)
				}
			}
			before := q.Stats()
			b.ResetTimer()
			for range b.N {
				m, err := q.Dequeue(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := m.Ack(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			after := q.Stats()
			// The growth is the drain's records alone: no snapshot was
			// taken, no segment added or removed, and two records (the
			// lease and the ack) were appended per message.
			if after.SnapshotLSN != before.SnapshotLSN || len(after.Segments) != len(before.Segments) ||
				after.LastLSN-before.LastLSN != 2*uint64(b.N) {
				b.Fatalf("the drain of %d messages appended %d records, snapshot LSN %d then %d, segments %d then %d",
					b.N, after.LastLSN-before.LastLSN, before.SnapshotLSN, after.SnapshotLSN,
					len(before.Segments), len(after.Segments))
			}
			b.ReportMetric(float64(after.LogBytes-before.LogBytes)/float64(b.N), "log-B/msg")
		})
	}
}
