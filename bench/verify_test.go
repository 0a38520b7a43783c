package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestVerificationCatchesFaults drives deliberately faulty fake systems
// through the workloads and checks that every fault shows in the row.
func TestVerificationCatchesFaults(t *testing.T) {
	type workload struct {
		name string
		run  runner
		cell cell
	}
	drain := workload{wDrain, queueRunner(runDrain), cell{Workload: wDrain, Payload: 100, Producers: 1, Consumers: 1}}
	cycle := workload{wCycle, queueRunner(runCycle), cell{Workload: wCycle, Payload: 100, Producers: 4, Consumers: 4}}
	enqueue := workload{wEnqueue, runEnqueue, cell{Workload: wEnqueue, Payload: 100, Producers: 16}}
	tests := []struct {
		name      string
		mangle    func(int, []byte, [][]byte) [][]byte
		retain    bool
		want      string // "" for no errors at all
		workloads []workload
	}{
		{"honest", honest, false, "", []workload{drain, cycle, enqueue}},
		{"lossy", lossy, false, "lost", []workload{drain, cycle, enqueue}},
		{"duplicating", duplicating, false, "duplicate", []workload{drain, cycle, enqueue}},
		{"corrupting", corrupting, false, "corrupt", []workload{drain, cycle, enqueue}},
		// Only one consumer sees every message in order.
		{"reordering", reordering, false, "out-of-order", []workload{drain}},
		// Keeping the producer's buffer, which it reuses, shows up as the
		// same message delivered many times.
		{"retaining", honest, true, "duplicate", []workload{drain, enqueue}},
	}
	opts := runOpts{N: 500, Cap: time.Hour, Idle: 200 * time.Millisecond}
	for _, tt := range tests {
		for _, w := range tt.workloads {
			t.Run(tt.name+"/"+w.name, func(t *testing.T) {
				q := newFake(tt.mangle)
				q.retain = tt.retain
				out := w.run(context.Background(), fakeSystem(tt.name, q), t.TempDir(), w.cell, opts)
				got := allErrors(out)
				switch {
				case tt.want == "" && got != "":
					t.Errorf("honest queue reported %q", got)
				case tt.want != "" && !strings.Contains(got, tt.want):
					t.Errorf("errors %q do not mention %q", got, tt.want)
				}
			})
		}
	}
}

func allErrors(out []sample) string {
	var all []string
	for _, s := range out {
		all = append(all, s.Errors...)
	}
	return strings.Join(all, "; ")
}

// TestRowShowsLoss checks that a loss reaches the printed table, not only the
// sample.
func TestRowShowsLoss(t *testing.T) {
	q := newFake(lossy)
	s := fakeSystem("lossy", q)
	m := &matrix{base: t.TempDir(), rounds: 1, log: &strings.Builder{}, systems: []System{s},
		opts: runOpts{N: 100, Cap: time.Hour, Idle: 200 * time.Millisecond}}
	c := cell{Workload: wCycle, Payload: 100, Producers: 4, Consumers: 4}
	rows := m.runCell(context.Background(), c, queueRunner(runCycle))
	if len(rows) != 1 {
		t.Fatalf("got %d rows, want 1", len(rows))
	}
	var b strings.Builder
	writeTable(&b, rows)
	if !strings.Contains(b.String(), "lost 10") {
		t.Errorf("table does not show the 10 lost messages:\n%s", b.String())
	}
}

func TestPayloadRoundTrip(t *testing.T) {
	for _, size := range []int{minPayloadSize, 100, 1024, 64 << 10} {
		buf := make([]byte, size)
		encodePayload(buf, 7, 12345)
		p, seq, _, ok := decodePayload(buf, size)
		if !ok || p != 7 || seq != 12345 {
			t.Errorf("size %d: decoded (%d, %d, %v), want (7, 12345, true)", size, p, seq, ok)
		}
		buf[size-1] ^= 1
		if _, _, _, ok := decodePayload(buf, size); ok {
			t.Errorf("size %d: a flipped filler byte went unnoticed", size)
		}
	}
}
