package redisq_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// defaultDialTimeout is go-redis's default DialTimeout, which its
// default dialer (a net.Dialer) gives each connect.
const defaultDialTimeout = 5 * time.Second

// darkAddr is a client's network whose address goes dark at once: the
// connections it made are closed (as a dead primary's are reset) and
// every dial after that waits until its context ends or for hold, as
// go-redis's default dialer's connect to an address that answers no SYN
// waits out the dial's timeout (hold defaultDialTimeout), or a dialer
// that takes no timeout of its own waits on its context alone (hold 0).
type darkAddr struct {
	hold  time.Duration // how long a dark dial waits at most; 0: until its context ends
	deaf  bool          // a dark dial ignores its context: it waits for hold or gone alone
	mu    sync.Mutex
	dark  bool
	conns []net.Conn
	dials int           // dials made while dark
	subs  int           // of dials, those made for a subscription (subscriptionDial)
	gone  chan struct{} // closed when the test ends: a dial ends then too
}

func (d *darkAddr) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	if d.dark {
		d.dials++
		if subscriptionDial() {
			d.subs++
		}
		d.mu.Unlock()
		var held <-chan time.Time // nil, never ready, without hold
		ended := ctx.Done()
		if d.deaf {
			ended = nil
		}
		if d.hold > 0 {
			t := time.NewTimer(d.hold)
			defer t.Stop()
			held = t.C
		}
		select {
		case <-ended:
			return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
		case <-held:
			return nil, &net.OpError{Op: "dial", Net: network, Err: os.ErrDeadlineExceeded}
		case <-d.gone:
			return nil, &net.OpError{Op: "dial", Net: network, Err: net.ErrClosed}
		}
	}
	d.mu.Unlock()
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err == nil {
		d.mu.Lock()
		d.conns = append(d.conns, c)
		d.mu.Unlock()
	}
	return c, err
}

// subscriptionDial reports whether the dial under way is a
// subscription's: go-redis dials a PubSub's connection on the goroutine
// of the PubSub's call, where a pooled command's dial runs on a
// goroutine of the pool's own.
func subscriptionDial() bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, goRedisPkg+".(*PubSub).") {
			return true
		}
		if !more {
			return false
		}
	}
}

// goDark closes every connection made so far and holds every dial after.
func (d *darkAddr) goDark() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dark = true
	for _, c := range d.conns {
		_ = c.Close()
	}
}

func (d *darkAddr) darkDials() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dials
}

// subscriptionDials is how many of darkDials a subscription made.
func (d *darkAddr) subscriptionDials() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.subs
}

// sendTimes is a client hook that logs, for each send of an enqueue
// function (FCALL), when it returned and the deadline of its context
// (both from start) and its error.
type sendTimes struct {
	mu    sync.Mutex
	start time.Time
	lines []string
}

func (s *sendTimes) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *sendTimes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (s *sendTimes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if args := cmd.Args(); cmd.Name() == "fcall" && len(args) > 1 && strings.Contains(fmt.Sprint(args[1]), "enqueue") {
			dl, ok := ctx.Deadline()
			s.mu.Lock()
			if !s.start.IsZero() {
				deadline := "none"
				if ok {
					deadline = dl.Sub(s.start).Round(time.Millisecond).String()
				}
				s.lines = append(s.lines, fmt.Sprintf("%v, under a deadline at %s: %v",
					time.Since(s.start).Round(time.Millisecond), deadline, err))
			}
			s.mu.Unlock()
		}
		return err
	}
}

// TestBlackholeDefaults measures how long an Enqueue whose context has no
// deadline takes when the queue's address goes dark (its connections
// reset, every dial after unanswered), with go-redis's default options:
// a send dials DialerRetries (5) times for DialTimeout (5s) each, 100ms
// (DialerRetryTimeout) between, and the handle's default OpTimeout (5s)
// bounds the sends after the first. The client differs from go-redis's
// defaults only in MaxRetries -1 (Open refuses a client that sends a
// command again itself unless AcceptDoubleRuns) and in its Dialer (the
// dark address); the handle has ManualRequeue, so that no housekeeping
// call dials beside the Enqueue. It takes 30 s or more and asserts
// nothing: it prints the figure that README.md, doc.go and options.go
// quote (bench/results/redisq-blackhole-2026-12-06.txt). Run with
// WALQ_REDISQ_BLACKHOLE=1 go test -run TestBlackholeDefaults -v.
func TestBlackholeDefaults(t *testing.T) {
	if os.Getenv("WALQ_REDISQ_BLACKHOLE") == "" {
		t.Skip("a measurement of 30 s or more: set WALQ_REDISQ_BLACKHOLE=1 to run it")
	}
	srv := redistest.Start(t)
	ctx := context.Background()
	d := &darkAddr{hold: defaultDialTimeout, gone: make(chan struct{})}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, Dialer: d.dial})
	t.Cleanup(func() { _ = rdb.Close() })
	log := &sendTimes{}
	rdb.AddHook(log)
	q, err := redisq.Open(ctx, rdb, "blackhole-defaults", &redisq.Options{ManualRequeue: true})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	defer close(d.gone) // ends the subscription's held redial, so that its close ends too
	if _, err := q.Enqueue(ctx, []byte("before")); err != nil {
		t.Fatal(err)
	}
	d.goDark()
	start := time.Now()
	log.mu.Lock()
	log.start = start
	log.mu.Unlock()
	_, err = q.Enqueue(ctx, []byte("x"))
	took := time.Since(start)
	log.mu.Lock()
	for _, l := range log.lines {
		t.Logf("send returned at %s", l)
	}
	log.mu.Unlock()
	t.Logf("Enqueue with no deadline against a dark address, go-redis defaults, OpTimeout default: "+
		"returned after %v, %d dials while dark: %v", took.Round(10*time.Millisecond), d.darkDials(), err)
	if err == nil {
		t.Fatal("the Enqueue succeeded against a dark address")
	}
}
