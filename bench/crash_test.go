package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCrashWorkload kills a child that filled walq and dque stores, then
// opens them: every message the child was told was stored must come out,
// and walq's open must have replayed the whole log of a crashed process.
func TestCrashWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	systems, err := selectSystems(allSystems(), "walq/never,dque/turbo")
	if err != nil {
		t.Fatal(err)
	}
	m := &matrix{base: t.TempDir(), rounds: 2, log: io.Discard, systems: systems,
		opts: runOpts{Idle: 10 * time.Second}, order: newRoundOrder(1)}
	c := cell{Workload: wCrash, Payload: 1024, Producers: recoveryProducers, Consumers: 1, Size: 1 << 20}
	rows := m.runRecovery(context.Background(), c, m.buildCrashed(os.Args[0], time.Minute))
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	for _, r := range rows {
		if len(r.Errors) > 0 {
			t.Errorf("%s: %v", r.System, r.Errors)
		}
		if r.Messages != 1024 || r.Open <= 0 {
			t.Errorf("%s: %d messages, open %v; want 1024 and a time", r.System, r.Messages, r.Open)
		}
	}
	if want := "replayed 1024 records after snapshot LSN 0"; !strings.HasPrefix(rows[0].Note, want) {
		t.Errorf("walq's note %q, want it to start with %q", rows[0].Note, want)
	}
}

func TestKilledBySIGKILL(t *testing.T) {
	tests := []struct {
		name   string
		script string
		ok     bool
	}{
		{"killed", "kill -9 $$", true},
		{"exit 0", "true", false},
		{"exit 1", "exit 1", false},
		{"other signal", "kill -15 $$", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := killedBySIGKILL(exec.Command("sh", "-c", tt.script).Run())
			if (err == nil) != tt.ok {
				t.Errorf("err = %v, want ok %v", err, tt.ok)
			}
		})
	}
}
