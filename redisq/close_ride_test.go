package redisq_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/leakcheck"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestCloseEndsRide: Close ends the calls that ride through refusals (a
// server turned replica of a primary that never answers refuses every
// write with READONLY), the one sent and those queued behind it, with
// queue.ErrClosed, long before OpTimeout, and leaves none of the handle's
// goroutines or timers running.
func TestCloseEndsRide(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	require.NoError(t, rdb.Ping(ctx).Err())
	before := goroutinesOf(redisqPkg)
	q, err := redisq.Open(ctx, rdb, "closeride", &redisq.Options{OpTimeout: time.Minute, AckTimeout: time.Minute})
	require.NoError(t, err)
	// A primary that is not there: the replica keeps refusing writes.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	require.NoError(t, rdb.Do(ctx, "REPLICAOF", "127.0.0.1", strconv.Itoa(port)).Err())
	defer rdb.Do(ctx, "REPLICAOF", "NO", "ONE")

	const n = 4
	done := make(chan error, n)
	for i := range n {
		go func() { _, err := q.Enqueue(ctx, []byte("m"), queue.WithID(strconv.Itoa(i))); done <- err }()
	}
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("an Enqueue returned while the server refused writes: %v", err)
	default:
	}
	start := time.Now()
	require.NoError(t, q.Close())
	for range n {
		select {
		case err := <-done:
			require.ErrorIs(t, err, queue.ErrClosed)
		case <-time.After(5 * time.Second):
			t.Fatal("an Enqueue still rides 5s after Close")
		}
	}
	require.Less(t, time.Since(start), 2*time.Second, "Close and the calls it ended")
	if left := newGoroutines(before, 5*time.Second, redisqPkg); left != "" {
		t.Fatalf("goroutines of the handle still running 5s after Close:\n%s", left)
	}
}

// goroutinesOf returns the running goroutines of the packages given that
// are not the tests' own, by their stack's header ("goroutine N [...]").
func goroutinesOf(pkgs ...string) map[string]leakcheck.Goroutine {
	out := make(map[string]leakcheck.Goroutine)
	for _, g := range leakcheck.Running(pkgs...) {
		if !leakcheck.InTest(g) {
			id, _, _ := strings.Cut(g.Stack, " [")
			out[id] = g
		}
	}
	return out
}

// newGoroutines waits up to grace for the goroutines of pkgs that were
// not in before (goroutinesOf) to end, and returns the stacks of those
// still running, or "".
func newGoroutines(before map[string]leakcheck.Goroutine, grace time.Duration, pkgs ...string) string {
	for deadline := time.Now().Add(grace); ; time.Sleep(20 * time.Millisecond) {
		var b strings.Builder
		for id, g := range goroutinesOf(pkgs...) {
			if _, ok := before[id]; !ok {
				b.WriteString("--- " + g.Func + "\n" + g.Stack + "\n\n")
			}
		}
		if b.Len() == 0 || time.Now().After(deadline) {
			return b.String()
		}
	}
}
