package fuzz_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// This file is the plumbing shared by the tests that run the test binary
// again as a child process (kill -9, I/O errors): the child is selected by
// an environment variable holding its JSON configuration, and reports every
// operation on file descriptor 3, one line per operation, each line written
// with a single write so that a SIGKILL can cut the stream only between
// lines.
//
// Report lines: "<code> <token>", codes:
//
//	a  enqueue started           e  enqueue returned success
//	d  delivered (dequeue returned it)
//	k  ack started               K  ack returned success     x  ack failed (lease lost)
//	R  released: a nack or dead-letter returned success (the message stays)
//	p  publish started           P  publish returned success (sorted queue)
//	l  value pulled in a batch   b  batch ack started (one line per value)
//	B  batch ack returned        y  batch ack failed          M  batch nacked
//	r  "r <ns> <ns>": recovery durations of the two queues, once both are open
//	s  "s <step>": the child kills itself at this snapshot step
//	F  "F <text>": an injected I/O error surfaced (ioerror test)
//	!  "! <text>": the child saw something it must not see; the test fails
//
// For an asynchronous call (EnqueueAsync, SettleAsync, AckAsync) "returned
// success" (e, K) is written once its Pending completed without error.

// childEnv selects the child workload; its value is the JSON configuration.
const childEnv = "WALQ_FUZZ_CHILD"

// childConfig is what the parent tells a child.
type childConfig struct {
	Mode     string        // "kill9" or "ioerror"
	Dir      string        // the ack queue's directory
	Sorted   string        // the sorted queue's directory ("" for none)
	Cycle    int           // names the tokens of this child
	Seed     uint64        // the child's random choices
	Sync     int           // queue.SyncMode
	DieAt    string        // snapshot step at which to SIGKILL itself ("" for none)
	Lifetime time.Duration // exit by then if nobody killed it
	Limit    int64         // ioerror: RLIMIT_FSIZE in bytes (0: none)
	Once     bool          // ioerror: lift the limit after the first failure
	Segment  int64         // ioerror: segment size
	Kill9    *kill9Options // kill9: the queues' options
	Lease    time.Duration // kill9dead: AckTimeout (0: a minute)
	Manual   bool          // kill9dead: ManualRequeue; the child ends expired leases itself
	IDs      string        // kill9dedup: file of producer ids, one "known ID" or "absent ID" a line
	Window   time.Duration // kill9dedup: DedupWindow
	Snapshot int64         // kill9dedup: SnapshotBytes
}

// childConfigFromEnv returns the configuration when this process is a
// child, or nil.
func childConfigFromEnv(t *testing.T, mode string) *childConfig {
	s := os.Getenv(childEnv)
	if s == "" {
		return nil
	}
	var c childConfig
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		t.Fatalf("child config: %v", err)
	}
	if c.Mode != mode {
		return nil
	}
	return &c
}

// reporter writes report lines to the parent.
type reporter struct {
	w *os.File // fd 3; os.File serializes concurrent writes
}

func newReporter() *reporter { return &reporter{w: os.NewFile(3, "report")} }

// line writes one line per token, all in one write.
func (r *reporter) line(code byte, toks ...string) {
	var b bytes.Buffer
	for _, t := range toks {
		b.WriteByte(code)
		b.WriteByte(' ')
		b.WriteString(t)
		b.WriteByte('\n')
	}
	if _, err := r.w.Write(b.Bytes()); err != nil {
		os.Exit(3) // the parent is gone
	}
}

// failf reports a violation the child saw.
func (r *reporter) failf(format string, args ...any) {
	r.line('!', strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " "))
}

// child is a running child process.
type child struct {
	cmd    *exec.Cmd
	out    bytes.Buffer  // the child's stdout and stderr
	lines  chan string   // report lines; closed at EOF
	readMu sync.Mutex    // guards out
	start  time.Time     // when it was started
	done   chan struct{} // closed when Wait returned
	err    error         // Wait's result
}

// startChild runs the test binary again with only the named test, as the
// child described by cfg; a failure to start it fails t. Call it from the
// test's own goroutine (t.Fatal); elsewhere call launchChild.
func startChild(t *testing.T, testName string, cfg childConfig) *child {
	t.Helper()
	c, err := launchChild(testName, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// launchChild is startChild for any goroutine: it returns the failure to
// start the child instead of failing a test.
func launchChild(testName string, cfg childConfig) (*child, error) {
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("child config: %w", err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("child report pipe: %w", err)
	}
	c := &child{lines: make(chan string, 4096), done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^"+testName+"$", "-test.count=1", "-test.timeout=0")
	c.cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	c.cmd.Stdout, c.cmd.Stderr = &lockedWriter{mu: &c.readMu, w: &c.out}, &lockedWriter{mu: &c.readMu, w: &c.out}
	c.cmd.ExtraFiles = []*os.File{pw}
	dieWithParent(c.cmd)
	c.start = time.Now()
	if err := c.cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("start child: %w", err)
	}
	pw.Close()
	go c.read(pr)
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// read forwards whole lines from the report pipe; a line cut by the kill
// (no newline) is dropped.
func (c *child) read(r io.ReadCloser) {
	defer close(c.lines)
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		s, err := br.ReadString('\n')
		if err != nil {
			return
		}
		c.lines <- s[:len(s)-1]
	}
}

// runFor hands each report line of the child to apply, in order, until
// the child's reports end, and kills the child with SIGKILL once run has
// passed; it returns once the child has ended.
func (c *child) runFor(run time.Duration, apply func(line string)) {
	timer := time.NewTimer(run)
	defer timer.Stop()
	for lines := c.lines; lines != nil; {
		select {
		case l, ok := <-lines:
			if !ok {
				lines = nil
				continue
			}
			apply(l)
		case <-timer.C:
			c.kill()
		}
	}
	<-c.done
}

// kill sends SIGKILL (the child may be gone already) and waits for it.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// killed reports whether the child died of SIGKILL.
func (c *child) killed() bool {
	ee, ok := c.err.(*exec.ExitError)
	if !ok {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// output returns the tail of the child's stdout and stderr.
func (c *child) output() string {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	s := c.out.String()
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return s
}

// raceReport returns the start of the first data race report in the
// child's output, "" when there is none. A child built with -race prints
// the report as soon as it finds the race, but a child that is then killed
// never exits with the race detector's status.
func (c *child) raceReport() string {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	s := c.out.String()
	i := strings.Index(s, "WARNING: DATA RACE")
	if i < 0 {
		return ""
	}
	return s[i:min(len(s), i+6000)]
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
