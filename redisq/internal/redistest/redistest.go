// Package redistest starts redis-server processes for tests (through
// internal/redisserver of the main module): each on a free loopback port,
// in the test's temporary directory, stopped by pid when the test ends.
// Under CI (CI set) a missing redis-server fails the test; elsewhere it
// skips it.
package redistest

import (
	"errors"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/walq/walq/internal/redisserver"
)

// Server is one redis-server process of a test.
type Server struct {
	*redisserver.Server
	t testing.TB
}

// Durable is the configuration walq's SyncAlways needs.
var Durable = redisserver.Durable

// Start starts a redis-server with the given extra arguments (Durable
// when none) and returns once it answers PING.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	s, err := redisserver.Start(t.TempDir(), extra...)
	if errors.Is(err, redisserver.ErrNotInstalled) {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not on PATH; CI must install it (.ci/run)")
		}
		t.Skip("redis-server is not on PATH")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return &Server{Server: s, t: t}
}

// Client returns a client of the server, closed when the test ends.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Restart starts the server again on the same port and directory.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.Server.Restart(); err != nil {
		s.t.Fatal(err)
	}
}

// Hook is a go-redis hook that passes every dial, command and pipeline
// through unchanged. A test's hook embeds it and defines only the
// methods it needs (most often ProcessHook).
type Hook struct{}

// DialHook passes the dial through.
func (Hook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook passes the command through.
func (Hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook passes the pipeline through.
func (Hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
