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
		q := openBench(b, nil)
		for range b.N {
			if _, err := q.Enqueue(ctx, payload); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("enqueue/async", func(b *testing.B) {
		q := openBench(b, nil)
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
			q := openBench(b, nil)
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

// BenchmarkAsync measures one goroutine's asynchronous calls, one message
// at a time, under SyncAlways and SyncNever, 100-byte payloads
// (WALQ_BENCH_PAYLOAD if set), and the process's CPU time per message:
//
//   - enqueue: EnqueueAsync of b.N messages;
//   - ack: Dequeue and AckAsync of each of a backlog of b.N messages;
//   - settle: DequeueBatch of 64 and one SettleAsync of their acks, as
//     bench/'s walq/stream and walq/never-stream consumers do;
//   - stream: one producer's EnqueueAsync of b.N messages beside one
//     consumer's DequeueBatch(64) and SettleAsync, as bench/'s cycle of
//     those systems with one producer and one consumer.
//
// Each ends with a Flush, timed: its messages are as durable as the mode
// promises when it stops. Run with -benchmem for allocs/op.
func BenchmarkAsync(b *testing.B) {
	for _, mode := range []struct {
		name string
		sync queue.SyncMode
	}{{"always", queue.SyncAlways}, {"never", queue.SyncNever}} {
		for _, run := range []struct {
			name string
			fill bool // the run drains a backlog of b.N messages
			f    func(b *testing.B, q *queue.Queue)
		}{{"enqueue", false, asyncEnqueue}, {"ack", true, asyncAck},
			{"settle", true, asyncSettle}, {"stream", false, asyncStream}} {
			b.Run(run.name+"/"+mode.name, func(b *testing.B) {
				q, err := queue.Open(b.TempDir(), &queue.Options{Sync: mode.sync})
				if err != nil {
					b.Fatal(err)
				}
				defer q.Close()
				if run.fill {
					fill(b, q, make([]byte, benchPayload()))
				}
				b.ReportAllocs()
				b.ResetTimer()
				cpu := processCPU()
				counted := countSyscalls(b)
				run.f(b, q)
				if err := q.Flush(context.Background()); err != nil {
					b.Fatal(err)
				}
				counted()
				b.StopTimer()
				reportCPU(b, cpu)
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}

// asyncEnqueue enqueues b.N messages with EnqueueAsync.
func asyncEnqueue(b *testing.B, q *queue.Queue) {
	payload := make([]byte, benchPayload())
	for range b.N {
		if _, err := q.EnqueueAsync(context.Background(), payload); err != nil {
			b.Fatal(err)
		}
	}
}

// asyncAck takes b.N messages with Dequeue and acks each with AckAsync.
func asyncAck(b *testing.B, q *queue.Queue) {
	for range b.N {
		m, err := q.Dequeue(context.Background())
		if err == nil {
			_, err = m.AckAsync()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// asyncSettle takes b.N messages with DequeueBatch of 64 and acks each
// batch with one SettleAsync.
func asyncSettle(b *testing.B, q *queue.Queue) { settleBatches(context.Background(), b, q) }

// settleBatches is asyncSettle, failing once ctx is done.
func settleBatches(ctx context.Context, b *testing.B, q *queue.Queue) {
	ss := make([]queue.Settlement, 0, 64)
	for done := 0; done < b.N; {
		ms, err := q.DequeueBatch(ctx, min(64, b.N-done))
		if err != nil {
			b.Fatal(err)
		}
		ss = ss[:0]
		for _, m := range ms {
			ss = append(ss, queue.Settlement{Receipt: m.Receipt, Op: queue.SettleAck})
		}
		if _, err := q.SettleAsync(ss...); err != nil {
			b.Fatal(err)
		}
		done += len(ms)
	}
}

// asyncStream runs asyncEnqueue and asyncSettle side by side, and returns
// once both are done. A producer that fails stops the consumer, which
// would otherwise wait for the messages it never enqueued.
func asyncStream(b *testing.B, q *queue.Queue) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		payload := make([]byte, benchPayload())
		for range b.N {
			if _, err := q.EnqueueAsync(context.Background(), payload); err != nil {
				b.Error(err)
				cancel()
				return
			}
		}
	}()
	defer func() { <-produced }()
	settleBatches(ctx, b, q)
}
