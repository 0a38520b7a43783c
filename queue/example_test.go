package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"sync"
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

	for i, id := range []string{"event-1", "event-2"} {
		if _, err := q.Enqueue(ctx, []byte{'1' + byte(i)}, queue.WithID(id)); err != nil {
			log.Fatal(err)
		}
	}
	m1, err := q.Dequeue(ctx)
	if err != nil {
		log.Fatal(err)
	}
	m2, err := q.Dequeue(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("dequeued", string(m1.Payload), string(m2.Payload))
	if err := m2.Ack(); err != nil {
		log.Fatal(err)
	}
	if _, err := q.TryDequeue(); errors.Is(err, queue.ErrEmpty) {
		fmt.Println("nothing ready: event-1 is still owned by its consumer")
	}

	time.Sleep(200 * time.Millisecond) // event-1's consumer never acks
	n, err := q.RequeueExpired()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("requeued", n)

	again, err := q.Dequeue(ctx)
	if err != nil {
		log.Fatal(err)
	}
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
	q, err := queue.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	jobs := queue.NewTyped[Job](q)
	if _, err := jobs.Enqueue(context.Background(), Job{Name: "resize", Attempts: 3}); err != nil {
		log.Fatal(err)
	}
	job, m, err := jobs.Dequeue(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Name, job.Attempts)
	if err := m.Ack(); err != nil {
		log.Fatal(err)
	}
	// Output: resize 3
}

// Work ordered by priority: a key's place is its most urgent value, and a
// pull takes a key's values together.
func ExampleOpenSorted() {
	dir, _ := os.MkdirTemp("", "walq-example")
	defer os.RemoveAll(dir)
	sq, err := queue.OpenSorted[int](dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer sq.Close()
	ctx := context.Background()
	for _, v := range []struct {
		sort     int
		key, job string
	}{{3, "customer-7", "report"}, {1, "customer-42", "invoice"}, {2, "customer-7", "refund"}} {
		if err := sq.Publish(ctx, v.sort, v.key, []byte(v.job)); err != nil {
			log.Fatal(err)
		}
	}

	batches, err := sq.Pull(ctx, 100)
	if err != nil {
		log.Fatal(err)
	}
	for _, b := range batches {
		fmt.Print(b.Key)
		for _, v := range b.Values {
			fmt.Printf(" %d:%s", v.Sort, v.Payload)
		}
		fmt.Println()
		if err := b.Ack(); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// customer-42 1:invoice
	// customer-7 2:refund 3:report
}

// Per-customer batching: a customer's records are shipped together once the
// oldest has waited the window.
func ExampleOpenWindowed() {
	dir, _ := os.MkdirTemp("", "walq-example")
	defer os.RemoveAll(dir)
	w, err := queue.OpenWindowed(dir, &queue.WindowOptions{Window: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	ctx := context.Background()
	for _, rec := range []string{"a", "b"} {
		if err := w.Publish(ctx, "customer-42", []byte(rec)); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := w.TryPull(100); errors.Is(err, queue.ErrEmpty) {
		fmt.Println("window still open")
	}
	batches, err := w.Pull(ctx, 100) // waits until the window closes
	if err != nil {
		log.Fatal(err)
	}
	for _, b := range batches {
		fmt.Println(b.Key, len(b.Values), "values")
		if err := b.Ack(); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// window still open
	// customer-42 2 values
}

// The worker loop to copy: workers dequeue until the queue is closed or the
// context ends; long work extends its lease; a failure nacks with a delay,
// so the message comes back later; success acks. A streaming producer feeds
// them without waiting for each fsync.
func Example_worker() {
	dir, _ := os.MkdirTemp("", "walq-example")
	defer os.RemoveAll(dir)
	q, err := queue.Open(dir, &queue.Options{AckTimeout: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// process fails the first delivery of "job-3", as a flaky dependency would.
	process := func(m *queue.Message) error {
		if string(m.Payload) == "job-3" && m.Deliveries == 1 {
			return errors.New("upstream timeout")
		}
		return nil
	}
	acked := make(chan string, 4)
	var workers sync.WaitGroup
	for range 2 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for {
				m, err := q.Dequeue(ctx)
				if errors.Is(err, queue.ErrClosed) || ctx.Err() != nil {
					return // shutting down
				}
				if res := queue.ReadErrors(err); len(res) > 0 {
					for _, re := range res { // damage: set it aside, fenced to this delivery
						if err := q.DeadLetter(re.Delivery, "unreadable"); err != nil {
							log.Printf("dead-letter %s: %v", re.ID, err)
						}
					}
					continue
				}
				if err != nil {
					log.Printf("dequeue: %v", err)
					return
				}
				if strings.HasPrefix(string(m.Payload), "long") {
					if err := m.Extend(10 * time.Minute); err != nil { // the work takes longer than AckTimeout
						log.Printf("extend %s: %v", m.ID, err) // ErrLeaseLost: it is another delivery's now
						continue
					}
				}
				if err := process(m); err != nil {
					if err := m.Nack(10 * time.Millisecond); err != nil { // try again a little later
						log.Printf("nack %s: %v", m.ID, err) // ErrLeaseLost: the lease ran out, it is ready again
					}
					continue
				}
				if err := m.Ack(); err != nil {
					log.Printf("ack %s: %v", m.ID, err) // ErrLeaseLost: it was redelivered
					continue
				}
				acked <- fmt.Sprintf("%s (delivery %d)", m.Payload, m.Deliveries)
			}
		}()
	}

	// The producer streams: no call waits for an fsync; Flush waits for all.
	for _, job := range []string{"job-1", "job-2", "job-3", "long-job-4"} {
		if _, err := q.EnqueueAsync(ctx, []byte(job)); err != nil {
			log.Fatal(err)
		}
	}
	if err := q.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	var done []string
	for range 4 {
		done = append(done, <-acked)
	}
	if err := q.Close(); err != nil { // the workers' Dequeue returns ErrClosed
		log.Fatal(err)
	}
	workers.Wait()
	slices.Sort(done)
	fmt.Println(strings.Join(done, "\n"))
	// Output:
	// job-1 (delivery 1)
	// job-2 (delivery 1)
	// job-3 (delivery 2)
	// long-job-4 (delivery 1)
}

// A batch consumer leases many messages at once and settles them in one
// commit: one write and one fsync for the whole batch.
func ExampleQueue_DequeueBatch() {
	dir, _ := os.MkdirTemp("", "walq-example")
	defer os.RemoveAll(dir)
	q, err := queue.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	for i := range 5 {
		if _, err := q.EnqueueAsync(ctx, []byte(fmt.Sprint(i))); err != nil {
			log.Fatal(err)
		}
	}
	if err := q.Flush(ctx); err != nil {
		log.Fatal(err)
	}

	ms, err := q.DequeueBatch(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leased", len(ms))
	stale := ms[0].Receipt
	fmt.Println("ack all:", ms.Ack())
	err = q.AckBatch(stale, ms[1].Receipt) // both acked already
	var be *queue.BatchError
	fmt.Println(errors.As(err, &be), errors.Is(err, queue.ErrLeaseLost), len(be.Errs))
	// Output:
	// leased 5
	// ack all: <nil>
	// true true 2
}

// ReadErrors finds every message a delivery could not read, however the
// error was wrapped on its way up.
func ExampleReadErrors() {
	// What a DequeueBatch that met two damaged messages returns, wrapped
	// by a caller as it went up.
	delivery := errors.Join(
		&queue.ReadError{ID: "a", Seq: 1, Delivery: queue.Receipt{Seq: 1, Lease: 10}, Err: queue.ErrCorrupt},
		&queue.ReadError{ID: "b", Seq: 2, Delivery: queue.Receipt{Seq: 2, Lease: 11}, Err: queue.ErrCorrupt})
	err := fmt.Errorf("batch 7: %w", errors.Join(delivery, errors.New("metrics: push failed")))

	for _, re := range queue.ReadErrors(err) {
		fmt.Println(re.ID, re.Delivery) // q.DeadLetter(re.Delivery, why) sets it aside
	}
	// Output:
	// a 1.10
	// b 2.11
}
