package redisq_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// The benchmarks run the full cycle (enqueue, dequeue, ack) of 100-byte
// messages on a redis-server of their own, per appendfsync mode, through
// redisq and through a bare stream loop of the same shape (XADD,
// XREADGROUP, XACK+XDEL): the bound a queue on Redis streams cannot beat.
// Besides cycles/s they report the server's cost per message two ways:
// redis-µs/msg, the time the server spent in the top-level commands
// (INFO commandstats: EVALSHA for redisq, the stream commands for the bare
// loop; a script's time includes its nested calls), and server-µs/msg,
// the process's CPU (used_cpu_sys + used_cpu_user of INFO), which adds
// networking and the AOF. The other commands each ran, per message, are
// logged.

var fsyncModes = []string{"always", "everysec"}

func server(b *testing.B, fsync string) *redistest.Server {
	return redistest.Start(b, "--appendonly", "yes", "--appendfsync", fsync, "--maxmemory-policy", "noeviction")
}

// BenchmarkCycle: 4 goroutines, each enqueues one message, dequeues one
// and acks it, as queue's BenchmarkCycle.
func BenchmarkCycle(b *testing.B) {
	for _, fsync := range fsyncModes {
		b.Run("redisq/"+fsync, func(b *testing.B) {
			srv := server(b, fsync)
			q := openBench(b, srv)
			payload := make([]byte, 100)
			ctx := context.Background()
			cpu := resetStats(b, srv)
			b.SetParallelism(2) // 2 per core: 4 on the 2-core machine
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := q.Enqueue(ctx, payload); err != nil {
						b.Error(err)
						return
					}
					m, err := q.Dequeue(ctx)
					if err == nil {
						err = m.Ack()
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			report(b, srv, cpu, b.N)
		})
		b.Run("streams/"+fsync, func(b *testing.B) {
			srv := server(b, fsync)
			rdb := srv.Client()
			ctx := context.Background()
			setupStream(b, rdb)
			payload := make([]byte, 100)
			cpu := resetStats(b, srv)
			b.SetParallelism(2)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "s", Values: []any{"p", payload}}).Err(); err != nil {
						b.Error(err)
						return
					}
					ids, err := readStream(ctx, rdb, 1)
					if err == nil {
						err = ackStream(ctx, rdb, ids)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			report(b, srv, cpu, b.N)
		})
	}
}

// BenchmarkCycleBatch: one producer enqueues batches of 100, 4 consumers
// dequeue batches of up to 100 and ack each message (redisq coalesces
// concurrent acks into one script call; the bare loop acks a batch with
// one XACK and one XDEL).
func BenchmarkCycleBatch(b *testing.B) {
	for _, fsync := range fsyncModes {
		b.Run("redisq/"+fsync, func(b *testing.B) {
			srv := server(b, fsync)
			q := openBench(b, srv)
			ctx := context.Background()
			cpu := resetStats(b, srv)
			b.ResetTimer()
			batchCycle(b, func() error {
				items := make([]queue.Item, 100)
				for i := range items {
					items[i].Payload = make([]byte, 100)
				}
				_, err := q.EnqueueBatch(ctx, items)
				return err
			}, ackEachOfBatch(q))
			report(b, srv, cpu, b.N)
		})
		b.Run("streams/"+fsync, func(b *testing.B) {
			srv := server(b, fsync)
			rdb := srv.Client()
			ctx := context.Background()
			setupStream(b, rdb)
			cpu := resetStats(b, srv)
			b.ResetTimer()
			batchCycle(b, func() error {
				pipe := rdb.Pipeline()
				for range 100 {
					pipe.XAdd(ctx, &redis.XAddArgs{Stream: "s", Values: []any{"p", make([]byte, 100)}})
				}
				_, err := pipe.Exec(ctx)
				return err
			}, func(ctx context.Context) (int, error) {
				ids, err := readStream(ctx, rdb, 100)
				if err == nil {
					err = ackStream(ctx, rdb, ids)
				}
				return len(ids), err
			})
			report(b, srv, cpu, b.N)
		})
	}
}

// ackEachOfBatch is a consumer for batchCycle: it dequeues a batch of
// up to 100 from q and acks each message on a goroutine of its own,
// which redisq coalesces into one script call.
func ackEachOfBatch(q *redisq.Queue) func(ctx context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		ms, err := q.DequeueBatch(ctx, 100)
		if err != nil {
			return 0, err
		}
		var wg sync.WaitGroup
		errs := make([]error, len(ms))
		for i, m := range ms {
			wg.Go(func() { errs[i] = m.Ack() })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return 0, err
			}
		}
		return len(ms), nil
	}
}

// batchCycle enqueues b.N messages (rounded up to batches of 100) from
// one producer while 4 consumers take them.
func batchCycle(b *testing.B, enqueue func() error, take func(ctx context.Context) (int, error)) {
	total := (b.N + 99) / 100 * 100
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	wg.Go(func() {
		for i := 0; i < total; i += 100 {
			if err := enqueue(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	for range 4 {
		wg.Go(func() {
			for {
				mu.Lock()
				done := taken >= total
				mu.Unlock()
				if done || b.Failed() {
					return
				}
				n, err := take(ctx)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				taken += n
				if taken >= total {
					cancel()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

func openBench(b *testing.B, srv *redistest.Server) *redisq.Queue {
	q, err := redisq.Open(context.Background(), srv.Client(), "bench", &redisq.Options{TrustServer: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = q.Close() })
	return q
}

func setupStream(b *testing.B, rdb *redis.Client) {
	if err := rdb.XGroupCreateMkStream(context.Background(), "s", "g", "0").Err(); err != nil {
		b.Fatal(err)
	}
}

// readStream blocks for up to n entries of the group; a short BLOCK keeps
// the consumers that finish first from waiting long.
func readStream(ctx context.Context, rdb *redis.Client, n int64) ([]string, error) {
	res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{"s", ">"},
		Count: n, Block: 100 * 1e6}).Result()
	if err == redis.Nil {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, st := range res {
		for _, m := range st.Messages {
			ids = append(ids, m.ID)
		}
	}
	return ids, nil
}

func ackStream(ctx context.Context, rdb *redis.Client, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	pipe := rdb.Pipeline()
	pipe.XAck(ctx, "s", "g", ids...)
	pipe.XDel(ctx, "s", ids...)
	_, err := pipe.Exec(ctx)
	return err
}

// serverCPU returns the server's CPU seconds so far.
func serverCPU(b *testing.B, srv *redistest.Server) float64 {
	info, err := srv.Client().Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	total := 0.0
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return total
}

func report(b *testing.B, srv *redistest.Server, cpu0 float64, n int) {
	b.StopTimer()
	cpu := serverCPU(b, srv) - cpu0
	st := commandStats(b, srv)
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "cycles/s")
	b.ReportMetric(cpu/float64(n)*1e6, "server-µs/msg")
	top := 0.0
	for _, name := range topLevel {
		top += st[name].usec
	}
	b.ReportMetric(top/float64(n), "redis-µs/msg")
	b.ReportMetric(scripts(st).calls/float64(n), "scripts/msg")
	b.Logf("other commands, calls and µs per message: %s", nestedStats(st, n))
}

// topLevel are the commands the benchmarks send: their commandstats time
// includes the nested calls of scripts, which are not added again.
var topLevel = []string{"fcall", "evalsha", "eval", "xadd", "xreadgroup", "xack", "xdel"}

// scripts sums the calls and time of the server-side code the queue
// runs: the library's functions (FCALL) and scripts (EVALSHA).
func scripts(st map[string]cmdStat) cmdStat {
	return cmdStat{calls: st["fcall"].calls + st["evalsha"].calls, usec: st["fcall"].usec + st["evalsha"].usec}
}

// resetStats zeroes the server's commandstats and returns its CPU seconds.
func resetStats(b *testing.B, srv *redistest.Server) float64 {
	if err := srv.Client().ConfigResetStat(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
	return serverCPU(b, srv)
}

type cmdStat struct{ calls, usec float64 }

// commandStats parses INFO commandstats: cmdstat_<name>:calls=..,usec=..
func commandStats(b *testing.B, srv *redistest.Server) map[string]cmdStat {
	info, err := srv.Client().Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]cmdStat{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st cmdStat
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				st.calls = f
			case "usec":
				st.usec = f
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return out
}

// nestedStats renders the commands other than FCALL and EVALSHA per message: calls
// and µs.
func nestedStats(st map[string]cmdStat, n int) string {
	var out []string
	for name, c := range st {
		if name != "fcall" && name != "evalsha" && name != "config|resetstat" && name != "info" {
			out = append(out, name+"="+strconv.FormatFloat(c.calls/float64(n), 'f', 2, 64)+
				"/"+strconv.FormatFloat(c.usec/float64(n), 'f', 2, 64)+"µs")
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// BenchmarkScripts profiles redisq's calls one at a time (appendfsync
// everysec): b.N messages enqueued in batches of size, then dequeued in
// batches of size, then acked size at a time concurrently (coalesced into
// one call when size > 1). It reports each phase's FCALL time per message
// (commandstats) and the server's CPU per message (INFO used_cpu_*), and
// logs the other commands each phase ran per message. With size 1 the
// FCALL time per message is the cost of one call.
func BenchmarkScripts(b *testing.B) {
	for _, size := range []int{1, 100} {
		b.Run(fmt.Sprint("size=", size), func(b *testing.B) { benchScripts(b, size) })
	}
}

func benchScripts(b *testing.B, size int) {
	srv := server(b, "everysec")
	q := openBench(b, srv)
	ctx := context.Background()
	total := (b.N + size - 1) / size * size
	items := make([]queue.Item, size)
	for i := range items {
		items[i].Payload = make([]byte, 100)
	}
	var ms []*queue.Message
	phases := []struct {
		name string
		run  func() error
	}{
		{"enqueue", func() error {
			for i := 0; i < total; i += size {
				if _, err := q.EnqueueBatch(ctx, items); err != nil {
					return err
				}
			}
			return nil
		}},
		{"dequeue", func() error {
			for len(ms) < total {
				got, err := q.DequeueBatch(ctx, size)
				if err != nil {
					return err
				}
				ms = append(ms, got...)
			}
			return nil
		}},
		{"ack", func() error { return ackAll(ms, size) }},
	}
	b.ResetTimer()
	for _, p := range phases {
		cpu := resetStats(b, srv)
		if err := p.run(); err != nil {
			b.Fatal(err)
		}
		cpu = serverCPU(b, srv) - cpu
		st := commandStats(b, srv)
		b.ReportMetric(scripts(st).usec/float64(total), p.name+"-µs/msg")
		b.ReportMetric(cpu*1e6/float64(total), p.name+"-cpu-µs/msg")
		b.Logf("%s: %.0f script calls; other commands, calls and µs per message: %s",
			p.name, scripts(st).calls, nestedStats(st, total))
	}
}

// ackAll acks ms size at a time, each size concurrently.
func ackAll(ms []*queue.Message, size int) error {
	for i := 0; i < len(ms); i += size {
		part := ms[i:min(i+size, len(ms))]
		errs := make([]error, len(part))
		var wg sync.WaitGroup
		for j, m := range part {
			wg.Go(func() { errs[j] = m.Ack() })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
	}
	return nil
}
