package redisq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
)

// consume is engine-independent: it runs on the embedded queue and on
// Redis alike.
func consume(ctx context.Context, q queue.AckQueue) error {
	m, err := q.Dequeue(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("%s\n", m.Payload)
	return m.Ack()
}

// Switching engines is changing the Open call.
func Example() {
	ctx := context.Background()
	var q queue.AckQueue
	if addr := "localhost:6379"; addr != "" {
		rq, err := redisq.Open(ctx, redis.NewClient(&redis.Options{Addr: addr}), "jobs",
			&redisq.Options{AckTimeout: 30 * time.Second})
		if err != nil {
			fmt.Println(err)
			return
		}
		q = rq
	} else {
		eq, err := queue.Open("/var/lib/app/jobs", &queue.Options{AckTimeout: 30 * time.Second})
		if err != nil {
			fmt.Println(err)
			return
		}
		q = eq
	}
	defer q.Close()
	if _, err := q.Enqueue(ctx, []byte("hello")); err != nil {
		fmt.Println(err)
		return
	}
	if err := consume(ctx, q); err != nil {
		fmt.Println(err)
	}
}
