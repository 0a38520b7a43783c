package queue_test

import (
	"context"
	"testing"

	"github.com/walq/walq/queue"
)

// BenchmarkStream compares, in one run, one producer enqueueing durably
// (SyncAlways, 100-byte payloads) call by call against the same producer
// streaming with EnqueueAsync, and a consumer that acks a DequeueBatch of
// 64 one by one, in one AckBatch, and with AckAsync.
func BenchmarkStream(b *testing.B) {
	payload := make([]byte, 100)
	ctx := context.Background()
	b.Run("enqueue/per-call", func(b *testing.B) {
		q := openBench(b)
		for range b.N {
			if _, err := q.Enqueue(ctx, payload); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("enqueue/async", func(b *testing.B) {
		q := openBench(b)
		for range b.N {
			if _, err := q.EnqueueAsync(ctx, payload); err != nil {
				b.Fatal(err)
			}
		}
		if err := q.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
	for _, mode := range []string{"per-call", "batch", "async"} {
		b.Run("ack/"+mode, func(b *testing.B) {
			q := openBench(b)
			fill(b, q, payload)
			b.ResetTimer()
			for done := 0; done < b.N; {
				ms, err := q.DequeueBatch(ctx, min(64, b.N-done))
				if err != nil {
					b.Fatal(err)
				}
				if err := ackAll(q, ms, mode); err != nil {
					b.Fatal(err)
				}
				done += len(ms)
			}
			if err := q.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "acks/s")
		})
	}
}

func openBench(b *testing.B) *queue.Queue {
	b.Helper()
	q, err := queue.Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { q.Close() })
	return q
}

// fill enqueues b.N messages in batches.
func fill(b *testing.B, q *queue.Queue, payload []byte) {
	b.Helper()
	items := make([]queue.Item, 256)
	for i := range items {
		items[i].Payload = payload
	}
	for n := 0; n < b.N; n += len(items) {
		if _, err := q.EnqueueBatch(context.Background(), items[:min(len(items), b.N-n)]); err != nil {
			b.Fatal(err)
		}
	}
}

func ackAll(q *queue.Queue, ms queue.Messages, mode string) error {
	switch mode {
	case "batch":
		return ms.Ack()
	case "async":
		_, err := ms.AckAsync()
		return err
	}
	for _, m := range ms {
		if err := m.Ack(); err != nil {
			return err
		}
	}
	return nil
}
