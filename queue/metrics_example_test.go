package queue_test

import (
	"context"
	"expvar"
	"fmt"
	"log/slog"
	"os"

	"github.com/walq/walq/queue"
)

// A service logs the queue's events through its own logger and publishes
// its metrics with expvar (served at /debug/vars by the expvar package),
// with nothing more than the standard library.
func ExampleQueue_Metrics() {
	dir, _ := os.MkdirTemp("", "walq-metrics")
	defer os.RemoveAll(dir)
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	q, err := queue.Open(dir, &queue.Options{Logger: logger})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	expvar.Publish("walq_orders", expvar.Func(func() any { return q.Metrics() }))

	if _, err := q.Enqueue(context.Background(), []byte("order 1")); err != nil {
		panic(err)
	}
	m, err := q.TryDequeue()
	if err != nil {
		panic(err)
	}
	if err := m.Ack(); err != nil {
		panic(err)
	}
	mt := q.Metrics()
	fmt.Println("enqueued", mt.Enqueued, "acked", mt.Acked, "timed acks", mt.EnqueueToAckSeconds.Count)
	// Output: enqueued 1 acked 1 timed acks 1
}
