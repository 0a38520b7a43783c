package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for the harness in the backlog
// workload's child processes.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		if err := childMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestBacklogChildren runs the backlog workload's two child processes on a
// small store and checks what they report.
func TestBacklogChildren(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	systems, err := selectSystems(allSystems(), "dque/turbo")
	if err != nil {
		t.Fatal(err)
	}
	out := runBacklog(t, systems[0], 1<<20)
	grow, drain := out[0], out[2]
	if grow.Ops != 1024 || drain.Ops != 1024 {
		t.Errorf("grew %d and drained %d messages, want 1024 each", grow.Ops, drain.Ops)
	}
	if grow.RSS <= 0 || len(grow.Curve) == 0 {
		t.Errorf("grow sampled no RSS (peak %d, %d curve points)", grow.RSS, len(grow.Curve))
	}
	for _, s := range out {
		if s.AnonRSS <= 0 || s.AnonRSS > s.RSS {
			t.Errorf("%s: anonymous RSS %d, want above 0 and at most the RSS %d", s.Phase, s.AnonRSS, s.RSS)
		}
	}
	if grow.Disk < 1<<20 || drain.Disk >= grow.Disk {
		t.Errorf("disk %d after growth, %d after drain: want ≥ 1 MiB, then less", grow.Disk, drain.Disk)
	}
}

// runBacklog runs the backlog workload on sys with size bytes of 1 KiB
// messages and checks that it reported its three phases without errors;
// it returns the grow, open and drain samples.
func runBacklog(t *testing.T, sys System, size int64) []sample {
	t.Helper()
	c := cell{Workload: wBacklog, Payload: 1024, Producers: backlogProducers, Consumers: backlogConsumers, Size: size}
	out := backlogRunner(os.Args[0], time.Minute)(context.Background(), sys, t.TempDir(), c, runOpts{Idle: 10 * time.Second})
	var phases []string
	for _, s := range out {
		phases = append(phases, s.Phase)
	}
	if got := strings.Join(phases, ","); got != "grow,open,drain" {
		t.Fatalf("phases %q, want grow,open,drain; errors: %s", got, allErrors(out))
	}
	if e := allErrors(out); e != "" {
		t.Errorf("errors: %s", e)
	}
	return out
}
