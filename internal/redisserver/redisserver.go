// Package redisserver starts and stops redis-server processes for the
// Redis backend's tests, the benchmark harness and the command's tests:
// each on a free loopback port, in a directory of the caller's, stopped by
// pid. It talks to the server with bare RESP PING and INFO only, so the
// main module needs no Redis client. Restart first repairs the server's
// AOF where Redis 7.0's loader would not (aof.go): the harness judges
// walq against a correct server.
//
// A Server is not safe for concurrent use.
package redisserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNotInstalled is returned by Start when redis-server is not on PATH.
var ErrNotInstalled = errors.New("redisserver: redis-server is not on PATH")

// Durable is the configuration walq's SyncAlways needs.
var Durable = []string{"--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "noeviction"}

// Server is one redis-server process.
type Server struct {
	Addr string   // host:port on loopback
	Dir  string   // its working directory: AOF, RDB, log
	args []string // its command line without the port, for Restart
	cmd  *exec.Cmd
	// cuts counts the Restarts whose repairAOF cut an open MULTI block.
	cuts int
	// exited is closed once cmd has exited and waitErr holds what Wait
	// returned; one goroutine of start's waits for the process.
	exited  chan struct{}
	waitErr error
}

// startGuard bounds how long start waits for a server that neither
// answers PING nor exits. It is only a guard against a hung server: on a
// loaded machine, where the test process and its redis-server are
// niced, a start has been seen to take more than 10 s.
const startGuard = 2 * time.Minute

// Start starts a redis-server in dir with the given extra arguments
// (Durable when none) on a free loopback port, and returns once it
// answers PING; it fails if the server exits first.
func Start(dir string, extra ...string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	if len(extra) == 0 {
		extra = Durable
	}
	s := &Server{Dir: dir}
	s.args = append([]string{bin, "--bind", "127.0.0.1", "--save", "", "--dir", dir,
		"--logfile", "redis.log", "--daemonize", "no"}, extra...)
	// freePort's port is free only until it returns: another process may
	// bind it before the server does, which then exits saying so. Such a
	// start is tried again on another port.
	for tries := 1; ; tries++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		err = s.start(port)
		if err == nil || tries == 3 || !errors.Is(err, errPortTaken) {
			return s, err
		}
	}
}

// errPortTaken is wrapped by start's error when the server exited because
// another process held its port.
var errPortTaken = errors.New("redisserver: port taken")

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redisserver: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) start(port int) error {
	s.Addr = "127.0.0.1:" + strconv.Itoa(port)
	args := append(append([]string{}, s.args[1:]...), "--port", strconv.Itoa(port))
	s.cmd = exec.Command(s.args[0], args...)
	s.cmd.Dir = s.Dir
	if err := s.cmd.Start(); err != nil {
		s.cmd = nil
		return fmt.Errorf("redisserver: start: %w", err)
	}
	s.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		s.waitErr = cmd.Wait()
		close(exited)
	}(s.cmd, s.exited)
	return s.awaitPing()
}

// awaitPing waits until the server answers PING. It fails when the
// server exits first, or when it has done neither by startGuard.
func (s *Server) awaitPing() error {
	guard := time.NewTimer(startGuard)
	defer guard.Stop()
	for {
		err := ping(s.Addr, s.cmd.Process.Pid)
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			s.cmd = nil
			log := s.Log()
			if strings.Contains(log, "Address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return fmt.Errorf("redisserver: %s exited before it answered (%v): %w\n%s", s.Addr, s.waitErr, err, log)
		case <-guard.C:
			s.Kill()
			return fmt.Errorf("redisserver: %s did not answer within %v: %w\n%s", s.Addr, startGuard, err, s.Log())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ping sends PING and expects +PONG (the server is up and has loaded its
// files: it answers -LOADING meanwhile), then asks INFO server and
// expects the answer of process pid: another server that holds the port
// (our own then exits, unable to bind it) is not taken for ours.
func ping(addr string, pid int) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("redisserver: PING answered %q", strings.TrimSpace(line))
	}
	info, err := readBulk(r)
	if err != nil {
		return fmt.Errorf("redisserver: INFO server: %w", err)
	}
	if got := infoField(info, "process_id"); got != strconv.Itoa(pid) {
		return fmt.Errorf("redisserver: %s is held by process %q, not by the server started (%d)", addr, got, pid)
	}
	return nil
}

// readBulk reads one RESP bulk string.
func readBulk(r *bufio.Reader) (string, error) {
	head, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	head = strings.TrimSpace(head)
	n, err := strconv.Atoi(strings.TrimPrefix(head, "$"))
	if !strings.HasPrefix(head, "$") || err != nil || n < 0 {
		return "", fmt.Errorf("not a bulk string: %q", head)
	}
	buf := make([]byte, n+2) // and its CRLF
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// infoField returns the value of name in an INFO reply, "" when absent.
func infoField(info, name string) string {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+":"); ok {
			return v
		}
	}
	return ""
}

// Kill sends SIGKILL to the server and waits for it: what survives is
// what the server had written to its files.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited // the exit status is the kill itself
	s.cmd = nil
}

// Stop asks the server to shut down (SIGTERM: it writes and fsyncs its
// AOF, then exits) and waits for it, killing it after 10 s.
func (s *Server) Stop() error {
	if s.cmd == nil {
		return nil
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.Kill()
		return fmt.Errorf("redisserver: stop: %w", err)
	}
	select {
	case <-s.exited:
		s.cmd = nil
		if s.waitErr != nil {
			return fmt.Errorf("redisserver: stop: %w", s.waitErr)
		}
		return nil
	case <-time.After(10 * time.Second):
		s.Kill()
		return errors.New("redisserver: stop: no exit 10 s after SIGTERM; killed")
	}
}

// Restart starts the server again on the same port and directory. First
// it cuts the last incr AOF back to before a MULTI that no EXEC closes,
// as a fixed server's loader does (see aof.go: Redis 7.0 leaves such a
// block open after a kill tore it, and replays half of it a start later).
func (s *Server) Restart() error {
	_, port, _ := net.SplitHostPort(s.Addr)
	p, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("redisserver: address %q: %w", s.Addr, err)
	}
	cut, err := s.repairAOF()
	if err != nil {
		return err
	}
	if cut {
		s.cuts++
	}
	return s.start(p)
}

// AOFCuts returns how many of the server's Restarts cut an open MULTI
// block off its AOF: how often the repair Restart makes was needed.
func (s *Server) AOFCuts() int { return s.cuts }

// Pid returns the server's process id, 0 when it is not running.
func (s *Server) Pid() int {
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Log returns the last 20 lines of the server's log.
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
	return strings.Join(lines, "\n")
}
