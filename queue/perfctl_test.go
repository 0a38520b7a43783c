package queue_test

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// countSyscalls turns on the counters of a `perf stat --control` that runs
// the test binary, and returns the function that turns them off, so that
// the counts cover the timed part of a benchmark, not its setup (a
// backlog's enqueues). WALQ_PERF_CTL names the control FIFO and the
// acknowledgement FIFO, comma separated, as given to perf:
//
//	mkfifo ctl ack
//	WALQ_PERF_CTL=ctl,ack perf stat -D -1 --control fifo:ctl,ack -e ... ./queue.test -test.bench ...
//
// Without it both do nothing. The run of b.N = 1 that precedes the others
// is counted too.
func countSyscalls(b *testing.B) (off func()) {
	b.Helper()
	ctlOnce.Do(ctl.open)
	if ctl.err != nil {
		b.Fatalf("WALQ_PERF_CTL: %v", ctl.err)
	}
	if ctl.out == nil {
		return func() {}
	}
	ctl.command(b, "enable")
	return func() { ctl.command(b, "disable") }
}

// perfControl holds the FIFOs WALQ_PERF_CTL names, opened once per process.
type perfControl struct {
	out *os.File      // perf reads its commands here
	ack *bufio.Reader // perf acknowledges each one here
	err error         // why they could not be opened
}

var (
	ctlOnce sync.Once
	ctl     perfControl
)

func (p *perfControl) open() {
	names := strings.Split(os.Getenv("WALQ_PERF_CTL"), ",")
	if names[0] == "" {
		return
	}
	if len(names) != 2 {
		p.err = fmt.Errorf("want two FIFOs, control and acknowledgement, got %q", names)
		return
	}
	out, err := os.OpenFile(names[0], os.O_WRONLY, 0)
	if err != nil {
		p.err = err
		return
	}
	in, err := os.Open(names[1])
	if err != nil {
		out.Close()
		p.err = err
		return
	}
	p.out, p.ack = out, bufio.NewReader(in)
}

// command sends perf a command and waits until perf acknowledges it.
func (p *perfControl) command(b *testing.B, cmd string) {
	b.Helper()
	if _, err := p.out.WriteString(cmd + "\n"); err != nil {
		b.Fatalf("perf %s: %v", cmd, err)
	}
	// perf writes "ack\n" with the string's NUL, read at the next line's start.
	if line, err := p.ack.ReadString('\n'); err != nil || strings.Trim(line, "\x00") != "ack\n" {
		b.Fatalf("perf %s: acknowledged %q, %v", cmd, line, err)
	}
}
