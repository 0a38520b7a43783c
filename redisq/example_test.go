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

// open picks the engine: Redis when an address is given, else the
// embedded queue in dir. Switching engines is changing the Open call.
func open(ctx context.Context, redisAddr, dir string) (queue.AckQueue, error) {
	if redisAddr != "" {
		rdb := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
		return redisq.Open(ctx, rdb, "jobs", &redisq.Options{AckTimeout: 30 * time.Second})
	}
	return queue.Open(dir, &queue.Options{AckTimeout: 30 * time.Second})
}

func Example() {
	ctx := context.Background()
	q, err := open(ctx, "localhost:6379", "")
	if err != nil {
		fmt.Println(err)
		return
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
