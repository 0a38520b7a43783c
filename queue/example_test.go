package queue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/walq/walq/queue"
)

// The ack-queue scenario: two events enqueued and dequeued, one acked; the
// other is not acked in time, so it is requeued and delivered again with
// the same id and enqueue time.
func Example() {
	dir, _ := os.MkdirTemp("", "walq-example")
	defer os.RemoveAll(dir)
	q, err := queue.Open(dir, &queue.Options{AckTimeout: 100 * time.Millisecond, ManualRequeue: true})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	ctx := context.Background()

	q.Enqueue(ctx, []byte("1"), queue.WithID("event-1"))
	q.Enqueue(ctx, []byte("2"), queue.WithID("event-2"))
	m1, _ := q.Dequeue(ctx)
	m2, _ := q.Dequeue(ctx)
	fmt.Println("dequeued", string(m1.Payload), string(m2.Payload))
	m2.Ack()
	if _, err := q.TryDequeue(); errors.Is(err, queue.ErrEmpty) {
		fmt.Println("nothing ready: event-1 is still owned by its consumer")
	}

	time.Sleep(200 * time.Millisecond) // event-1's consumer never acks
	n, _ := q.RequeueExpired()
	fmt.Println("requeued", n)

	again, _ := q.Dequeue(ctx)
	fmt.Println("dequeued", again.ID, "delivery", again.Deliveries, "same enqueue time:", again.EnqueuedAt.Equal(m1.EnqueuedAt))
	fmt.Println("ack:", again.Ack())
	fmt.Println("stale receipt:", m1.Ack())
	// Output:
	// dequeued 1 2
	// nothing ready: event-1 is still owned by its consumer
	// requeued 1
	// dequeued event-1 delivery 2 same enqueue time: true
	// ack: <nil>
	// stale receipt: queue: lease lost: receipt 1.3
}

func ExampleTyped() {
	type Job struct {
		Name     string
		Attempts int
	}
	dir, _ := os.MkdirTemp("", "walq-example")
	defer os.RemoveAll(dir)
	q, _ := queue.Open(dir, nil)
	defer q.Close()
	jobs := queue.NewTyped[Job](q)
	jobs.Enqueue(context.Background(), Job{Name: "resize", Attempts: 3})
	job, m, _ := jobs.Dequeue(context.Background())
	fmt.Println(job.Name, job.Attempts)
	m.Ack()
	// Output: resize 3
}
