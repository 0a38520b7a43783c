package queue

import (
	"context"
	"encoding/binary"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkIdleConsumer: under SyncNever a consumer that acks each message
// with AckAsync and goes back to Dequeue with nothing ready, while a
// producer enqueues one message every 2 ms (longer than the log's
// late-write delay). It reports the consumer's looks that found nothing
// per message and the delivery latency (from the call of Enqueue).
func BenchmarkIdleConsumer(b *testing.B) {
	q, err := Open(b.TempDir(), &Options{Sync: SyncNever})
	if err != nil {
		b.Fatal(err)
	}
	var looks atomic.Int64
	q.foundNothing = func() { looks.Add(1) }
	lat := make([]time.Duration, 0, b.N)
	got := make(chan struct{}) // closed when the consumer returns
	defer func() {
		q.Close() // ends a Dequeue the consumer still waits in
		<-got     // so that the consumer reports nothing after the benchmark returns
	}()
	go func() {
		defer close(got)
		for range b.N {
			m, err := q.Dequeue(context.Background())
			if err != nil {
				b.Error(err)
				return
			}
			lat = append(lat, time.Since(time.Unix(0, int64(binary.LittleEndian.Uint64(m.Payload)))))
			if _, err := m.AckAsync(); err != nil {
				b.Error(err)
				return
			}
		}
	}()
	b.ResetTimer()
	for range b.N {
		time.Sleep(2 * time.Millisecond)
		if _, err := q.Enqueue(context.Background(), binary.LittleEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))); err != nil {
			b.Fatal(err)
		}
	}
	<-got
	b.StopTimer()
	if b.Failed() {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(looks.Load())/float64(b.N), "empty-looks/msg")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkAckAsyncFlush: under SyncNever, Dequeue, AckAsync and Flush,
// one message at a time.
func BenchmarkAckAsyncFlush(b *testing.B) {
	q, err := Open(b.TempDir(), &Options{Sync: SyncNever})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	for range b.N {
		if _, err := q.Enqueue(context.Background(), []byte("x")); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		m, err := q.Dequeue(context.Background())
		if err == nil {
			_, err = m.AckAsync()
		}
		if err == nil {
			err = q.Flush(context.Background())
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}
