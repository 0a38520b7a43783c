package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/walq/walq/internal/redisserver"
)

// asynq is the Redis job queue Go users pick today. It pushes tasks to a
// handler instead of letting consumers pull; the adapter's handler hands
// each task to a consuming goroutine and returns (the task is done and
// deleted) when that goroutine acks it. Its redis-server is started as the
// Redis rows' (sys_redis.go).

// asynqCheckInterval replaces asynq's 1 s TaskCheckInterval, the sleep of
// its fetch loop after it found every queue empty: the workloads' consumers
// catch up with their producers, so the default would measure that sleep.
const asynqCheckInterval = 10 * time.Millisecond

func asynqSystems() []System {
	if !haveRedis() {
		return nil
	}
	var out []System
	for _, mode := range []string{"always", "everysec"} {
		out = append(out, System{
			Name: "asynq/" + mode, Family: "asynq", Mode: mode, Kind: KindQueue,
			Durable: redisModes[mode], Reader: "asynq/everysec",
			Config: func(h Hint) string {
				return fmt.Sprintf("redis-server %s, appendonly yes, appendfsync %s, loopback TCP; asynq v0.26.0: "+
					"Client.Enqueue per message; Server with Concurrency = consumers (%d), TaskCheckInterval %v "+
					"(default 1s), ShutdownTimeout 1s, MaxRetry 25 (default); the handler returns when the "+
					"consumer acks", redisVersion(), mode, max(h.Consumers, 1), asynqCheckInterval)
			},
			Open: func(dir string, h Hint) (Queue, error) { return openAsynq(dir, mode, h) },
		})
	}
	return out
}

type asynqQueue struct {
	srv    *redisserver.Server
	rdb    *redis.Client
	client *asynq.Client
	server *asynq.Server
	tasks  chan asynqDelivery // handed from the handler to the consumers
}

func openAsynq(dir, mode string, h Hint) (*asynqQueue, error) {
	srv, rdb, err := startRedis(dir, mode, 0)
	if err != nil {
		return nil, err
	}
	q := &asynqQueue{srv: srv, rdb: rdb, client: asynq.NewClientFromRedisClient(rdb),
		tasks: make(chan asynqDelivery)}
	q.server = asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:       max(h.Consumers, 1),
		TaskCheckInterval: asynqCheckInterval,
		ShutdownTimeout:   time.Second,
		LogLevel:          asynq.ErrorLevel,
	})
	if err := q.server.Start(asynq.HandlerFunc(q.handle)); err != nil {
		return nil, errors.Join(err, stopRedis(srv, rdb))
	}
	return q, nil
}

// handle gives the task to a consumer and waits for its ack.
func (q *asynqQueue) handle(ctx context.Context, t *asynq.Task) error {
	d := asynqDelivery{payload: t.Payload(), done: make(chan struct{})}
	select {
	case q.tasks <- d:
	case <-ctx.Done():
		return ctx.Err() // shutting down: asynq retries the task later
	}
	select {
	case <-d.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (q *asynqQueue) Enqueue(_ context.Context, payload []byte) error {
	_, err := q.client.Enqueue(asynq.NewTask("bench", payload))
	return err
}

func (q *asynqQueue) NewConsumer() (Consumer, error) { return asynqConsumer{q.tasks}, nil }

func (q *asynqQueue) Close() error {
	q.server.Shutdown()
	// q.client shares q.rdb (asynq refuses to close a shared client).
	return stopRedis(q.srv, q.rdb)
}

type asynqConsumer struct{ tasks <-chan asynqDelivery }

func (c asynqConsumer) Dequeue(ctx context.Context) (Delivery, error) {
	select {
	case d := <-c.tasks:
		return d, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (asynqConsumer) Close() error { return nil }

type asynqDelivery struct {
	payload []byte
	done    chan struct{} // closed by Ack: the handler returns nil
}

func (d asynqDelivery) Payload() []byte { return d.payload }

func (d asynqDelivery) Ack() error {
	close(d.done)
	return nil
}
