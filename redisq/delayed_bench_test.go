package redisq_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// BenchmarkCycleDelayed is BenchmarkCycleBatch (everysec) with delayed
// traffic and larger bodies: a quarter of each batch of 100 is delayed by
// a millisecond, bodies are 1 KiB. A batch dequeue that finds a delayed
// message due after its first read puts back what it popped and reads
// the records and bodies again (scripts/dequeue.lua): hmget/dequeue and
// zpopmin/dequeue (1 each without a re-read) show how often,
// redis-µs/msg what it costs.
func BenchmarkCycleDelayed(b *testing.B) {
	srv := server(b, "everysec")
	rdb := srv.Client()
	dequeues := &fcallCount{suffix: "_dequeue"}
	rdb.AddHook(dequeues)
	q, err := redisq.Open(context.Background(), rdb, "bench", &redisq.Options{TrustServer: true})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	cpu := resetStats(b, srv)
	b.ResetTimer()
	batchCycle(b, func() error {
		items := make([]queue.Item, 100)
		for i := range items {
			items[i].Payload = make([]byte, 1024)
			if i%4 == 0 {
				items[i].Delay = time.Millisecond
			}
		}
		_, err := q.EnqueueBatch(ctx, items)
		return err
	}, ackEachOfBatch(q))
	st := commandStats(b, srv)
	n := float64(dequeues.n.Load())
	b.ReportMetric(st["hmget"].calls/n, "hmget/dequeue")
	b.ReportMetric(st["zpopmin"].calls/n, "zpopmin/dequeue")
	b.ReportMetric(float64(b.N)/n, "msgs/dequeue")
	report(b, srv, cpu, b.N)
}

// fcallCount counts the FCALLs of the library functions whose name ends
// with suffix.
type fcallCount struct {
	redistest.Hook
	suffix string
	n      atomic.Int64
}

func (c *fcallCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name, ok := fcallName(cmd); ok && strings.HasSuffix(name, c.suffix) {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
