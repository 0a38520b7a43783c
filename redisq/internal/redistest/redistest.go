// Package redistest starts redis-server processes for tests: each on a
// free loopback port, in its own temporary directory, stopped by pid when
// the test ends. Under CI (CI set) a missing redis-server fails the test;
// elsewhere it skips it.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process.
type Server struct {
	Addr string   // host:port on loopback
	Dir  string   // its working directory: AOF, RDB, log
	args []string // its command line, for Restart
	cmd  *exec.Cmd
	t    testing.TB
}

// Durable is the configuration walq's SyncAlways needs.
var Durable = []string{"--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "noeviction"}

// Start starts a redis-server with the given extra arguments (Durable
// when none) and returns once it answers PING.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not on PATH; CI must install it (.ci/run)")
		}
		t.Skip("redis-server is not on PATH")
	}
	if len(extra) == 0 {
		extra = Durable
	}
	s := &Server{Dir: t.TempDir(), t: t}
	s.args = append([]string{bin, "--bind", "127.0.0.1", "--save", "", "--dir", s.Dir,
		"--logfile", "redis.log", "--daemonize", "no"}, extra...)
	s.start(freePort(t))
	t.Cleanup(s.Stop)
	return s
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) start(port int) {
	s.t.Helper()
	s.Addr = "127.0.0.1:" + strconv.Itoa(port)
	args := append(append([]string{}, s.args[1:]...), "--port", strconv.Itoa(port))
	s.cmd = exec.Command(s.args[0], args...)
	s.cmd.Dir = s.Dir
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer: %v\n%s", s.Addr, err, s.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Client returns a client of the server, closed when the test ends.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill sends SIGKILL to the server and waits for it: what survives is
// what the server had written to its files.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart starts the server again on the same port and directory.
func (s *Server) Restart() {
	s.t.Helper()
	_, port, _ := net.SplitHostPort(s.Addr)
	p, _ := strconv.Atoi(port)
	s.start(p)
}

// Stop kills the server if it runs.
func (s *Server) Stop() { s.Kill() }

// Pid returns the server's process id, 0 when it is not running.
func (s *Server) Pid() int {
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Log returns the tail of the server's log.
func (s *Server) Log() string {
	f, err := os.Open(filepath.Join(s.Dir, "redis.log"))
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return fmt.Sprint(lines)
}
