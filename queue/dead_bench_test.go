package queue_test

import (
	"context"
	"testing"

	"github.com/walq/walq/queue"
)

// deadLetterAll dead-letters every ready message of q.
func deadLetterAll(b *testing.B, q *queue.Queue) {
	for {
		ms, err := q.DequeueBatch(context.Background(), 1000)
		if err != nil && len(ms) == 0 {
			b.Fatal(err)
		}
		ss := make([]queue.Settlement, len(ms))
		for i, m := range ms {
			ss[i] = queue.Settlement{Receipt: m.Receipt, Op: queue.SettleDeadLetter, Reason: "x"}
		}
		if err := q.Settle(ss...); err != nil {
			b.Fatal(err)
		}
		if q.Stats().Ready == 0 {
			return
		}
	}
}

// BenchmarkRequeueAllDead requeues 20,000 dead letters of 512 bytes, each
// checked for damage first; ns/letter is the time per letter.
func BenchmarkRequeueAllDead(b *testing.B) {
	const n = 20000
	o := queue.Options{SegmentSize: 8 << 20}
	q, err := queue.Open(b.TempDir(), &o)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	items := make([]queue.Item, 1000)
	for i := range items {
		items[i].Payload = make([]byte, 512)
	}
	for range n / 1000 {
		if _, err := q.EnqueueBatch(context.Background(), items); err != nil {
			b.Fatal(err)
		}
	}
	deadLetterAll(b, q)
	b.ResetTimer()
	for range b.N {
		got, err := q.RequeueAllDead()
		if err != nil || got != n {
			b.Fatal(got, err)
		}
		b.StopTimer()
		deadLetterAll(b, q)
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/letter")
}
