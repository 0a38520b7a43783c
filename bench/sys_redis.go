package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/walq/walq/internal/redisserver"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
)

// The Redis rows: walq's Redis backend (redisq), and its bound, a bare
// stream loop of the same shape (one XADD per enqueue; one XREADGROUP
// COUNT 1 per dequeue; one XACK and one XDEL, pipelined, per ack): what a
// queue on one Redis server cannot beat. Each opens a redis-server of its
// own in the system's directory (AOF there; reopening the directory
// replays it), on a free loopback port, stopped by pid on Close. In the
// backlog workload (everysec rows) the server's memory is counted with
// the client process's: a backlog lives in the server. They need
// redis-server on PATH: without it they are left out, except under CI
// (CI set), where they stay and fail.

// redisModes maps a mode to the server's appendfsync and whether it is
// durable: appendfsync always fsyncs every write before the reply.
var redisModes = map[string]bool{"always": true, "everysec": false}

// haveRedis reports whether the Redis rows take part.
func haveRedis() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil || os.Getenv("CI") != ""
}

func redisSystems() []System {
	if !haveRedis() {
		return nil
	}
	var out []System
	for _, mode := range []string{"always", "everysec"} {
		durable := redisModes[mode]
		// The everysec rows load the backlog (same AOF format, faster);
		// not the recovery and crash workloads: a child killed there
		// would leave its redis-server running.
		bulk := !durable
		var only []string
		if bulk {
			only = []string{wDrain, wCycle, wBacklog}
		}
		out = append(out, System{
			Name: "redisq/" + mode, Family: "redisq", Mode: mode, Kind: KindQueue,
			Durable: durable, Bulk: bulk, Workloads: only, FIFO: true, Reader: "redisq/everysec",
			Config: func(Hint) string {
				return fmt.Sprintf("redis-server %s, appendonly yes, appendfsync %s, loopback TCP; "+
					"walq's Redis backend, %s, AckTimeout=%v; Enqueue, Dequeue, Ack one at a time "+
					"(concurrent Enqueues, Dequeues and Acks of the handle each share one call); backlog: the server's memory counted with the client's",
					redisVersion(), mode,
					map[bool]string{true: "SyncAlways", false: "SyncInterval"}[durable], walqAckTimeout)
			},
			Open: func(dir string, _ Hint) (Queue, error) { return openRedisq(dir, mode) },
		}, System{
			Name: "streams/" + mode, Family: "streams", Mode: mode, Kind: KindQueue,
			Durable: durable, Bulk: bulk, Workloads: only, FIFO: true, Reader: "streams/everysec",
			Config: func(Hint) string {
				return fmt.Sprintf("redis-server %s, appendonly yes, appendfsync %s, loopback TCP; the bound of a "+
					"queue on Redis: bare stream, one consumer group; XADD per enqueue, XREADGROUP COUNT 1 "+
					"BLOCK per dequeue, XACK+XDEL pipelined per ack; no leases, fencing, dead letters or "+
					"delays; backlog: the server's memory counted with the client's", redisVersion(), mode)
			},
			Open: func(dir string, _ Hint) (Queue, error) { return openStreams(dir, mode) },
		})
	}
	return out
}

func redisqSync(mode string) queue.SyncMode {
	if redisModes[mode] {
		return queue.SyncAlways
	}
	return queue.SyncInterval
}

// redisVersion is the first line of redis-server --version, once.
var redisVersion = func() func() string {
	var v string
	return func() string {
		if v == "" {
			v = commandLine("redis-server", "--version")
		}
		return v
	}
}()

// commandLine runs a command and returns the first line of its output.
func commandLine(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return "(" + name + ": " + err.Error() + ")"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

// startRedis starts a redis-server in dir with appendfsync mode and
// returns it with a client of maxRetries (go-redis's MaxRetries: 0 is its
// default of 3; redisq refuses a client that retries, -1).
func startRedis(dir, mode string, maxRetries int) (*redisserver.Server, *redis.Client, error) {
	srv, err := redisserver.Start(dir, "--appendonly", "yes", "--appendfsync", mode,
		"--maxmemory-policy", "noeviction")
	if err != nil {
		return nil, nil, err
	}
	return srv, redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64, MaxRetries: maxRetries}), nil
}

// stopRedis closes the client and stops the server, which writes its AOF
// on the way out.
func stopRedis(srv *redisserver.Server, rdb *redis.Client) error {
	return errors.Join(rdb.Close(), srv.Stop())
}

type redisqQueue struct {
	srv *redisserver.Server
	rdb *redis.Client
	q   *redisq.Queue
}

func openRedisq(dir, mode string) (*redisqQueue, error) {
	srv, rdb, err := startRedis(dir, mode, -1)
	if err != nil {
		return nil, err
	}
	q, err := redisq.Open(context.Background(), rdb, "bench",
		&redisq.Options{Sync: redisqSync(mode), AckTimeout: walqAckTimeout})
	if err != nil {
		return nil, errors.Join(err, stopRedis(srv, rdb))
	}
	return &redisqQueue{srv: srv, rdb: rdb, q: q}, nil
}

func (r *redisqQueue) Enqueue(ctx context.Context, payload []byte) error {
	_, err := r.q.Enqueue(ctx, payload)
	return err
}

func (r *redisqQueue) NewConsumer() (Consumer, error) { return redisqConsumer{r.q}, nil }

func (r *redisqQueue) Close() error { return errors.Join(r.q.Close(), stopRedis(r.srv, r.rdb)) }

// ServerPid is the redis-server's pid: a backlog lives in its memory.
func (r *redisqQueue) ServerPid() int { return r.srv.Pid() }

// redisqConsumer is one goroutine's handle; the queue handle is shared.
type redisqConsumer struct{ q *redisq.Queue }

func (c redisqConsumer) Dequeue(ctx context.Context) (Delivery, error) {
	m, err := c.q.Dequeue(ctx)
	if err != nil {
		return nil, err
	}
	return walqDelivery{m}, nil
}

func (redisqConsumer) Close() error { return nil }

const (
	streamKey   = "bench"
	streamGroup = "workers"
)

type streamsQueue struct {
	srv *redisserver.Server
	rdb *redis.Client
}

func openStreams(dir, mode string) (*streamsQueue, error) {
	srv, rdb, err := startRedis(dir, mode, 0)
	if err != nil {
		return nil, err
	}
	err = rdb.XGroupCreateMkStream(context.Background(), streamKey, streamGroup, "0").Err()
	if err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") { // reopened: the group is there
		return nil, errors.Join(err, stopRedis(srv, rdb))
	}
	return &streamsQueue{srv: srv, rdb: rdb}, nil
}

func (s *streamsQueue) Enqueue(ctx context.Context, payload []byte) error {
	return s.rdb.XAdd(ctx, &redis.XAddArgs{Stream: streamKey, Values: []any{"p", payload}}).Err()
}

func (s *streamsQueue) NewConsumer() (Consumer, error) { return streamsConsumer{s.rdb}, nil }

func (s *streamsQueue) Close() error { return stopRedis(s.srv, s.rdb) }

// ServerPid is the redis-server's pid: a backlog lives in its memory.
func (s *streamsQueue) ServerPid() int { return s.srv.Pid() }

type streamsConsumer struct{ rdb *redis.Client }

// Dequeue reads one new entry for the group, blocking at most 100 ms per
// call (go-redis does not end a blocked read when ctx ends).
func (c streamsConsumer) Dequeue(ctx context.Context) (Delivery, error) {
	for {
		res, err := c.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: streamGroup, Consumer: "c",
			Streams: []string{streamKey, ">"}, Count: 1, Block: 100 * time.Millisecond}).Result()
		if errors.Is(err, redis.Nil) {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		m := res[0].Messages[0]
		p, _ := m.Values["p"].(string)
		return streamsDelivery{rdb: c.rdb, id: m.ID, payload: []byte(p)}, nil
	}
}

func (streamsConsumer) Close() error { return nil }

type streamsDelivery struct {
	rdb     *redis.Client
	id      string
	payload []byte
}

func (d streamsDelivery) Payload() []byte { return d.payload }

func (d streamsDelivery) Ack() error {
	ctx := context.Background()
	pipe := d.rdb.Pipeline()
	pipe.XAck(ctx, streamKey, streamGroup, d.id)
	pipe.XDel(ctx, streamKey, d.id)
	_, err := pipe.Exec(ctx)
	return err
}
