package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/walq/walq/internal/cli"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
)

// engine opens the queues that redis:// and rediss:// URLs name.
type engine struct{}

var _ cli.Engine = engine{}

func (engine) Owns(target string) bool {
	return strings.HasPrefix(target, "redis://") || strings.HasPrefix(target, "rediss://")
}

// splitTarget splits a queue URL into the server's URL and the queue name,
// its last path element.
func splitTarget(target string) (server, name string, err error) {
	_, rest, _ := strings.Cut(target, "://")
	i := strings.LastIndex(target, "/")
	if !strings.Contains(rest, "/") || i == len(target)-1 {
		return "", "", fmt.Errorf("%w: %q names no queue: want redis://host:port[/db]/NAME",
			queue.ErrInvalidOptions, target)
	}
	return target[:i], target[i+1:], nil
}

func (engine) Form() string { return "redis://[user:password@]host:port[/db]/NAME" }

func (engine) Open(ctx context.Context, target string, o cli.EngineOptions) (queue.AckQueue, error) {
	server, name, err := splitTarget(target)
	if err != nil {
		return nil, err
	}
	ro, err := redis.ParseURL(server)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", queue.ErrInvalidOptions, err)
	}
	rdb := redis.NewClient(ro)
	q, err := redisq.Open(ctx, rdb, name, &redisq.Options{AckTimeout: o.AckTimeout,
		Sync: queue.SyncInterval, TrustServer: o.Inspect})
	if err != nil {
		return nil, errors.Join(err, rdb.Close())
	}
	return ownedQueue{Queue: q, rdb: rdb}, nil
}

// ownedQueue is a queue handle whose client the command opened: Close
// closes both.
type ownedQueue struct {
	*redisq.Queue
	rdb *redis.Client
}

func (q ownedQueue) Close() error { return errors.Join(q.Queue.Close(), q.rdb.Close()) }
