package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The backlog workload runs each system in child processes of this program
// (`bench child grow|drain …`), so that the resident memory it reports is
// the system's own, not the harness's:
//
//  1. grow: open, enqueue Size bytes of messages with backlogProducers
//     goroutines (or until -backlog-time), sampling RSS and bytes on disk;
//     close.
//  2. drain: open the same directory (timed, up to the first delivery), then
//     drain it with backlogConsumers goroutines, verifying every message;
//     close, and measure the bytes left on disk.
const (
	backlogProducers = 16
	backlogConsumers = 8
	// curveEvery is how often the grow child samples RSS and disk.
	curveEvery = 250 * time.Millisecond
)

// point is one sample of the grow curve.
type point struct {
	Seconds float64 `json:"seconds"`
	RSS     int64   `json:"rss_bytes"`
	AnonRSS int64   `json:"rss_anon_bytes"`
	Disk    int64   `json:"disk_bytes"`
}

// peakAnon is the largest anonymous RSS of a curve: the kernel keeps a
// peak of the whole RSS (VmHWM) but not of its anonymous part.
func peakAnon(curve []point) int64 {
	var peak int64
	for _, p := range curve {
		peak = max(peak, p.AnonRSS)
	}
	return peak
}

// serverProcess is implemented by systems whose messages live in a server
// process they started (the Redis rows): the backlog workload counts that
// process's memory with the child's own, since a backlog there is in the
// server's memory, not the client's.
type serverProcess interface {
	ServerPid() int // 0 when no server runs
}

// serverStatus is pidStatus of q's server, 0 when q has none.
func serverStatus(q Queue, field string) int64 {
	sp, ok := q.(serverProcess)
	if !ok || sp.ServerPid() == 0 {
		return 0
	}
	return pidStatus(strconv.Itoa(sp.ServerPid()), field)
}

// serverNote says what q's server held at the end of a phase, "" when q has
// no server.
func serverNote(q Queue) string {
	if _, ok := q.(serverProcess); !ok {
		return ""
	}
	return fmt.Sprintf("server process: peak RSS %d, anonymous RSS %d bytes, counted in the figures",
		serverStatus(q, "VmHWM"), serverStatus(q, "RssAnon"))
}

// childReport is what a child prints on stdout, as JSON.
type childReport struct {
	Samples []sample
	Counts  []int64 // grow: messages each producer enqueued
}

// backlogRunner returns the runner of the backlog workload; exe is this
// program, growCap bounds the growth phase.
func backlogRunner(exe string, growCap time.Duration) runner {
	return func(ctx context.Context, s System, dir string, c cell, o runOpts) []sample {
		common := []string{"-system", s.Name, "-dir", dir, "-payload", strconv.Itoa(c.Payload),
			"-size", strconv.FormatInt(c.Size, 10), "-idle", o.Idle.String()}
		grow, err := runChild(ctx, exe, append([]string{"grow", "-time", growCap.String()}, common...))
		if err != nil {
			return []sample{{Phase: "grow", Disk: -1, Errors: []string{err.Error()}}}
		}
		counts := make([]string, len(grow.Counts))
		for i, n := range grow.Counts {
			counts[i] = strconv.FormatInt(n, 10)
		}
		drain, err := runChild(ctx, exe, append([]string{"drain", "-counts", strings.Join(counts, ",")}, common...))
		if err != nil {
			drain = &childReport{Samples: []sample{{Phase: "open", Disk: -1}, {Phase: "drain", Disk: -1, Errors: []string{err.Error()}}}}
		}
		return append(grow.Samples, drain.Samples...)
	}
}

// runChild runs `exe child args…` and reads its report. A child given
// -kill must die of SIGKILL after reporting; any other child must exit 0.
func runChild(ctx context.Context, exe string, args []string) (*childReport, error) {
	cmd := exec.CommandContext(ctx, exe, append([]string{"child"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if slices.Contains(args, "-kill") {
		err = killedBySIGKILL(err)
	}
	if err != nil {
		return nil, fmt.Errorf("child %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	var rep childReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return nil, fmt.Errorf("child %s: bad report: %w", args[0], err)
	}
	return &rep, nil
}

// killedBySIGKILL returns nil when err says the process died of SIGKILL,
// and an error saying how it ended otherwise.
func killedBySIGKILL(err error) error {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return nil
		}
		return err
	}
	if err == nil {
		return errors.New("exited instead of being killed")
	}
	return err
}

// childMain is the entry point of `bench child grow|drain`.
func childMain(args []string) error {
	if len(args) == 0 {
		return errors.New("bench child: grow or drain?")
	}
	fs := flag.NewFlagSet("child "+args[0], flag.ContinueOnError)
	name := fs.String("system", "", "system name")
	dir := fs.String("dir", "", "store directory")
	payload := fs.Int("payload", 1024, "payload bytes")
	size := fs.Int64("size", 64<<20, "backlog bytes")
	limit := fs.Duration("time", time.Minute, "grow: most time to enqueue")
	idle := fs.Duration("idle", 10*time.Second, "drain: give up after this long without a message")
	counts := fs.String("counts", "", "drain: messages each producer enqueued")
	kill := fs.Bool("kill", false, "grow: report, then die of SIGKILL without closing the store")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	systems, err := selectSystems(allSystems(), *name)
	if err != nil {
		return err
	}
	var rep *childReport
	switch args[0] {
	case "grow":
		rep, err = childGrow(systems[0], *dir, *payload, *size, *limit, *kill)
	case "drain":
		rep, err = childDrain(systems[0], *dir, *payload, *size, *counts, *idle)
	default:
		err = fmt.Errorf("bench child: unknown step %q", args[0])
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(rep)
}

func childGrow(s System, dir string, payload int, size int64, limit time.Duration, kill bool) (*childReport, error) {
	ctx := context.Background()
	q, err := s.Open(dir, Hint{Producers: backlogProducers, Payload: payload})
	if err != nil {
		return nil, err
	}
	stopCurve := sampleCurve(dir, q)
	var errs errorLog
	stop, cancel := stopAfter(limit)
	defer cancel()
	prod := produce(ctx, q, backlogProducers, int(size/int64(payload)), payload, stop, &errs)
	if kill {
		return nil, dieAfterReport(&childReport{Counts: prod.counts})
	}
	settle(ctx, q, &errs)
	out := sample{Phase: "grow", Ops: prod.total(), Elapsed: prod.elapsed, RSS: procStatus("VmHWM") + serverStatus(q, "VmHWM"),
		Disk: diskUsage(dir), Curve: stopCurve(), Note: serverNote(q)}.withLat(&prod.lat)
	out.AnonRSS = peakAnon(out.Curve)
	if err := q.Close(); err != nil {
		errs.add("close", err)
	}
	out.Errors = errs.list()
	return &childReport{Samples: []sample{out}, Counts: prod.counts}, nil
}

// dieAfterReport writes rep to stdout, then kills this process with
// SIGKILL: no deferred function, no Close, no flush runs.
func dieAfterReport(rep *childReport) error {
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		return err
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGKILL); err != nil {
		return err
	}
	select {} // the signal is on its way
}

// sampleCurve samples RSS (with q's server's, if any) and disk every
// curveEvery until the returned stop is called, which returns the samples.
func sampleCurve(dir string, q Queue) (stop func() []point) {
	var curve []point // owned by the sampling goroutine until finished closes
	start := time.Now()
	done, finished := make(chan struct{}), make(chan struct{})
	take := func() {
		curve = append(curve, point{Seconds: time.Since(start).Seconds(), RSS: procStatus("VmRSS") + serverStatus(q, "VmRSS"),
			AnonRSS: procStatus("RssAnon") + serverStatus(q, "RssAnon"), Disk: diskUsage(dir)})
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(curveEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				take()
			case <-done:
				take()
				return
			}
		}
	}()
	return func() []point {
		close(done)
		<-finished
		return curve
	}
}

func childDrain(s System, dir string, payload int, size int64, countList string, idle time.Duration) (*childReport, error) {
	ctx := context.Background()
	counts, err := parseCounts(countList)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, n := range counts {
		total += n
	}
	per := perProducer(int(size/int64(payload)), len(counts))
	chk := newChecker(len(counts), per, payload, s.FIFO)
	chk.expect(counts)
	var errs errorLog

	// Open, timed up to the first delivery: some stores defer work to it.
	start := time.Now()
	q, err := s.Open(dir, Hint{Consumers: backlogConsumers, Payload: payload})
	if err != nil {
		return nil, err
	}
	if total > 0 {
		firstMessage(ctx, q, chk.view(), idle, &errs)
	}
	open := sample{Phase: "open", Ops: total, Elapsed: time.Since(start), RSS: procStatus("VmRSS") + serverStatus(q, "VmRSS"),
		AnonRSS: procStatus("RssAnon") + serverStatus(q, "RssAnon"), Disk: diskUsage(dir)}
	open.Open = open.Elapsed

	stopCurve := sampleCurve(dir, q)
	cons := drainAll(ctx, q, backlogConsumers, chk, max(total-1, 0), idle, &errs)
	settle(ctx, q, &errs)
	curve := stopCurve()
	srvPeak, note := serverStatus(q, "VmHWM"), serverNote(q) // before Close stops the server
	if err := q.Close(); err != nil {
		errs.add("close", err)
	}
	// VmHWM is the peak of the whole process, open included: the drain's
	// peak unless opening took more.
	drain := sample{Phase: "drain", Ops: total, Elapsed: cons.elapsed, RSS: procStatus("VmHWM") + srvPeak,
		AnonRSS: max(peakAnon(curve), open.AnonRSS), Disk: diskUsage(dir), Curve: curve, Note: note}.withLat(&cons.lat)
	drain.Errors = append(errs.list(), chk.problems()...)
	return &childReport{Samples: []sample{open, drain}}, nil
}

// firstMessage dequeues, checks and acks one message, through the system's
// single-message dequeue where it has one, so that nothing is prefetched and
// left unacked.
func firstMessage(ctx context.Context, q Queue, v *view, idle time.Duration, errs *errorLog) {
	ctx, cancel := context.WithTimeout(ctx, idle)
	defer cancel()
	d, err := dequeueOne(ctx, q)
	if err != nil {
		errs.add("first dequeue", err)
		return
	}
	v.check(d.Payload())
	if err := d.Ack(); err != nil {
		errs.add("first ack", err)
	}
}

func dequeueOne(ctx context.Context, q Queue) (Delivery, error) {
	if o, ok := q.(oneShot); ok {
		return o.DequeueOne(ctx)
	}
	c, err := q.NewConsumer()
	if err != nil {
		return nil, err
	}
	d, err := c.Dequeue(ctx)
	return d, errors.Join(err, c.Close())
}

func parseCounts(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bench child: bad -counts %q: %w", s, err)
		}
		out = append(out, n)
	}
	return out, nil
}
