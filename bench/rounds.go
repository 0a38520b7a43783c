package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Result is one row of the report: one system in one cell (and phase), over
// every round.
type Result struct {
	System    string
	Family    string
	Mode      string
	Workload  string // cell workload, with ".phase" for multi-phase workloads
	Payload   int
	Producers int
	Consumers int
	Size      int64 // backlog or log bytes; 0 for throughput workloads
	Config    string

	Rounds    int
	Ops       []float64 // ops/s of each round, in round order
	OpsPerSec float64   // median of Ops
	OpsMin    float64
	OpsMax    float64
	Messages  int64         // messages through the phase, median over rounds
	P50       time.Duration // median over rounds
	P99       time.Duration // median over rounds
	RSS       int64         // largest over rounds; 0 when not measured
	AnonRSS   int64         // largest over rounds; 0 when not measured
	Disk      int64         // median over rounds; -1 when not measured
	Open      time.Duration // median over rounds; recovery and backlog only

	Curve []point // RSS and disk during the first round (backlog growth and drain)
	Note  string  // the first round's note

	Reference string  // the walq system Ratio is against
	Ratio     float64 // median over rounds of ops/s ÷ the reference's ops/s in the same round; NaN when it did not run
	Errors    []string
}

// runner runs one system once in a fresh directory and returns a sample per
// phase, always the same phases in the same order.
type runner func(ctx context.Context, s System, dir string, c cell, o runOpts) []sample

// queueRunner wraps a workload that drives an open Queue: it opens the
// system, runs the workload and closes it, reporting failures as errors of
// the run.
func queueRunner(w func(context.Context, Queue, System, string, cell, runOpts) []sample) runner {
	return func(ctx context.Context, s System, dir string, c cell, o runOpts) []sample {
		q, err := s.Open(dir, c.hint())
		if err != nil {
			return []sample{{Disk: -1, Errors: []string{fmt.Sprintf("open: %v", err)}}}
		}
		out := w(ctx, q, s, dir, c, o)
		if err := q.Close(); err != nil {
			last := &out[len(out)-1]
			last.Errors = append(last.Errors, fmt.Sprintf("close: %v", err))
		}
		return out
	}
}

// matrix runs cells of the report, each over the same systems in
// alternating rounds.
type matrix struct {
	base    string      // directory under which every run gets a fresh one
	rounds  int         // rounds per cell
	opts    runOpts     // limits of every run
	log     io.Writer   // progress lines; io.Discard for none
	systems []System    // selected systems, walq first
	start   time.Time   // of the whole run, for the progress lines
	order   *roundOrder // the order of the systems in each round
}

// logf prints a progress line, stamped with the time since the run began.
func (m *matrix) logf(format string, args ...any) {
	fmt.Fprintf(m.log, "[%5.0fs] "+format+"\n", append([]any{time.Since(m.start).Seconds()}, args...)...)
}

// runCell runs every system that takes part in c, rounds times, each round
// in an order of its own (A C B, B A C, …), and returns a row per system
// and phase.
func (m *matrix) runCell(ctx context.Context, c cell, run runner) []Result {
	var systems []System
	for _, s := range m.systems {
		if applies(s, c.Workload) {
			systems = append(systems, s)
		}
	}
	runs := make(map[string][][]sample) // system → round → phases
	for r := range m.rounds {
		for _, i := range m.order.next(len(systems)) {
			s := systems[i]
			out := m.runOnce(ctx, s, c, run)
			runs[s.Name] = append(runs[s.Name], out)
			m.logf("%-28s round %d/%d  %-17s %s", c, r+1, m.rounds, s.Name, brief(out))
		}
	}
	var perSystem [][]Result
	for _, s := range systems {
		perSystem = append(perSystem, aggregate(s, c, runs[s.Name], runs[reference(s, c.Workload)]))
	}
	return phaseMajor(perSystem)
}

// phaseMajor orders rows phase by phase, so that each phase's table lists
// every system.
func phaseMajor(perSystem [][]Result) []Result {
	var rows []Result
	for ph := 0; ; ph++ {
		n := len(rows)
		for _, rs := range perSystem {
			if ph < len(rs) {
				rows = append(rows, rs[ph])
			}
		}
		if len(rows) == n {
			return rows
		}
	}
}

func (m *matrix) runOnce(ctx context.Context, s System, c cell, run runner) []sample {
	dir, err := os.MkdirTemp(m.base, "run-")
	if err != nil {
		return []sample{{Disk: -1, Errors: []string{err.Error()}}}
	}
	defer os.RemoveAll(dir)
	store := filepath.Join(dir, "store")
	if err := os.Mkdir(store, 0o700); err != nil {
		return []sample{{Disk: -1, Errors: []string{err.Error()}}}
	}
	return run(ctx, s, store, c, m.opts)
}

// brief is a run's progress line.
func brief(out []sample) string {
	s := ""
	for _, p := range out {
		s += fmt.Sprintf("%s%s ops/s ", phasePrefix(p.Phase), humanOps(p.opsPerSec()))
		if len(p.Errors) > 0 {
			s += fmt.Sprintf("ERRORS %v ", p.Errors)
		}
	}
	return s
}

func phasePrefix(phase string) string {
	if phase == "" {
		return ""
	}
	return phase + " "
}

// aggregate turns one system's rounds into rows, one per phase; ref holds
// the rounds of the system its ratio is against (nil when it did not run).
func aggregate(s System, c cell, rounds, ref [][]sample) []Result {
	var rows []Result
	for ph := range phaseCount(rounds) {
		r := Result{
			System: s.Name, Family: s.Family, Mode: s.Mode, Workload: c.Workload,
			Payload: c.Payload, Producers: c.Producers, Consumers: c.Consumers, Size: c.Size,
			Config: s.Config(c.hint()), Rounds: len(rounds), Reference: reference(s, c.Workload), Ratio: math.NaN(),
		}
		ss := phaseOf(rounds, ph)
		for _, smp := range ss {
			if smp.Phase != "" {
				r.Workload = c.Workload + "." + smp.Phase
				break
			}
		}
		fillFigures(&r, ss)
		if len(ref) == len(rounds) && s.Name != r.Reference {
			r.Ratio = ratio(ss, phaseOf(ref, ph))
		}
		rows = append(rows, r)
	}
	return rows
}

// phaseCount is the number of phases of the longest round: a round that
// failed early reports fewer.
func phaseCount(rounds [][]sample) int {
	n := 0
	for _, r := range rounds {
		n = max(n, len(r))
	}
	return n
}

// phaseOf picks phase ph of every round; a round that failed early may lack
// it and then gets an empty sample.
func phaseOf(rounds [][]sample, ph int) []sample {
	out := make([]sample, len(rounds))
	for i, r := range rounds {
		switch {
		case ph < len(r):
			out[i] = r[ph]
		case len(r) > 0:
			out[i] = sample{Disk: -1, Errors: r[len(r)-1].Errors}
		default:
			out[i] = sample{Disk: -1}
		}
	}
	return out
}

func fillFigures(r *Result, ss []sample) {
	var p50, p99, disk, open, msgs []float64
	for _, s := range ss {
		r.Ops = append(r.Ops, s.opsPerSec())
		p50 = append(p50, float64(s.P50))
		p99 = append(p99, float64(s.P99))
		disk = append(disk, float64(s.Disk))
		open = append(open, float64(s.Open))
		msgs = append(msgs, float64(s.Ops))
		r.RSS = max(r.RSS, s.RSS)
		r.AnonRSS = max(r.AnonRSS, s.AnonRSS)
	}
	r.Errors = roundErrors(ss)
	r.Curve, r.Note = ss[0].Curve, ss[0].Note
	r.OpsPerSec = median(r.Ops)
	r.OpsMin, r.OpsMax = minMax(r.Ops)
	r.P50, r.P99 = time.Duration(median(p50)), time.Duration(median(p99))
	r.Disk, r.Open, r.Messages = int64(median(disk)), time.Duration(median(open)), int64(median(msgs))
}

// ratio is the median over rounds of a's ops/s ÷ b's ops/s in the same round.
func ratio(a, b []sample) float64 {
	var rs []float64
	for i := range a {
		if x, y := a[i].opsPerSec(), b[i].opsPerSec(); y > 0 {
			rs = append(rs, x/y)
		}
	}
	return median(rs)
}

// roundErrors lists the errors of the rounds, each once, prefixed with the
// rounds it happened in when there were several: "r1,r3: lost 2".
func roundErrors(ss []sample) []string {
	var order []string
	in := make(map[string][]string)
	for i, s := range ss {
		for _, e := range s.Errors {
			if _, ok := in[e]; !ok {
				order = append(order, e)
			}
			in[e] = append(in[e], "r"+strconv.Itoa(i+1))
		}
	}
	var out []string
	for _, e := range order {
		if len(ss) > 1 {
			e = strings.Join(in[e], ",") + ": " + e
		}
		out = append(out, e)
	}
	return out
}
