package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"slices"
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
	rows := m.runCrash(context.Background(), c, m.buildCrashed(os.Args[0], time.Minute))
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

// dirQueues is a fake system's disk: one in-memory queue per store
// directory, and every open in the order it came.
type dirQueues struct {
	queues map[string]*fakeQueue
	opens  []string
}

// system returns a fake system whose store in dir is queues[dir].
func (d *dirQueues) system(name string) System {
	s := fakeSystem(name, nil)
	s.Bulk = true // takes part in the crash workload
	s.Open = func(dir string, _ Hint) (Queue, error) {
		if _, err := os.Stat(dir); err != nil {
			return nil, err
		}
		d.opens = append(d.opens, dir)
		if d.queues[dir] == nil {
			d.queues[dir] = newFake(honest)
		}
		return d.queues[dir], nil
	}
	return s
}

// TestCrashRoundOpensItsOwnStore checks the crash workload's structure
// with fake systems: each round of each system builds a store, the timed
// open is of that store itself (not of a copy), the round's first message
// is counted (the store then drains whole), and the store is removed.
func TestCrashRoundOpensItsOwnStore(t *testing.T) {
	d := &dirQueues{queues: make(map[string]*fakeQueue)}
	systems := []System{d.system("a"), d.system("b")}
	const rounds, messages = 3, 64
	m := &matrix{base: t.TempDir(), rounds: rounds, log: io.Discard, systems: systems,
		opts: runOpts{Idle: 10 * time.Second}, order: newRoundOrder(1)}
	var built []string
	build := func(ctx context.Context, s System, c cell) (*recoveryStore, error) {
		st, err := m.buildStore(ctx, s, c, time.Minute)
		if st != nil {
			st.crashed = true
			built = append(built, st.dir)
		}
		return st, err
	}
	c := cell{Workload: wCrash, Payload: 64, Producers: recoveryProducers, Consumers: 1, Size: messages * 64}
	rows := m.runCrash(context.Background(), c, build)
	if len(rows) != len(systems) {
		t.Fatalf("%d rows, want %d", len(rows), len(systems))
	}
	for _, r := range rows {
		if len(r.Errors) > 0 || r.Messages != messages || r.Rounds != rounds {
			t.Errorf("%s: %d messages in %d rounds, errors %v; want %d in %d, none",
				r.System, r.Messages, r.Rounds, r.Errors, messages, rounds)
		}
	}
	if len(built) != rounds*len(systems) {
		t.Fatalf("%d stores built, want one per round and system: %d", len(built), rounds*len(systems))
	}
	// Each store is opened three times in a row: by its build, by the
	// timed open, by the verification.
	var want []string
	for _, dir := range built {
		want = append(want, dir, dir, dir)
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("store %s left behind (stat: %v)", dir, err)
		}
	}
	if !slices.Equal(d.opens, want) {
		t.Errorf("opens\n%s\nwant\n%s", strings.Join(d.opens, "\n"), strings.Join(want, "\n"))
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
