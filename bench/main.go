package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"
)

// errWalqRows is returned when a walq row reports errors: the harness exits
// non-zero for those, so that CI catches a lost message in walq.
var errWalqRows = errors.New("bench: walq rows report errors")

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		if err := childMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(1)
	}
}

// config is the parsed command line.
type config struct {
	quick       bool
	n           int
	rounds      int
	cap         time.Duration
	idle        time.Duration
	systems     string
	workloads   string
	payloads    []int
	producers   []int
	backlog     int64
	backlogTime time.Duration
	recovery    []int64
	crash       int64 // payload bytes the crash workload's store holds
	jsonPath    string
	chartPath   string
	reportPath  string // print the report of this results file instead of running
	dir         string
	quiet       bool
	seed        uint64 // of the per-round order of the systems
}

// defaultCrashBytes is the crash workload's store: 60 MiB of 1 KiB
// payloads make about 62 MiB of walq log, under the 64 MiB of its default
// SnapshotBytes, so that an open after the kill replays all of it.
const defaultCrashBytes = 60 << 20

// defaults are the settings of the full run and of -quick.
var (
	fullDefaults = config{n: 200_000, rounds: 3, cap: time.Second, payloads: []int{100, 1024},
		producers: []int{1, 64, 256}, backlog: 256 << 20, backlogTime: 60 * time.Second,
		recovery: []int64{16 << 20, 128 << 20}, crash: defaultCrashBytes}
	quickDefaults = config{quick: true, n: 20_000, rounds: 2, cap: 300 * time.Millisecond, payloads: []int{100},
		producers: []int{1, 64}, backlog: 16 << 20, backlogTime: 20 * time.Second, recovery: []int64{16 << 20}, crash: 8 << 20}
)

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "small matrix and short runs: about two minutes")
	n := fs.Int("n", 0, "most messages per run (default 200000, 20000 with -quick)")
	rounds := fs.Int("rounds", 0, "alternating rounds per cell (default 3, 2 with -quick)")
	capD := fs.Duration("time", 0, "most time the producers of one run enqueue (default 1s, 300ms with -quick)")
	idle := fs.Duration("idle", 10*time.Second, "consumers give up after this long without a message (the rest is reported lost)")
	systems := fs.String("systems", "", "comma-separated systems or families to run (default all), e.g. walq,bbolt/batch")
	workloads := fs.String("workloads", "", "comma-separated workloads (default all): "+strings.Join(allWorkloads, ","))
	payloads := fs.String("payloads", "", "payload sizes for drain, cycle and enqueue (default 100,1KiB; 100 with -quick)")
	producers := fs.String("producers", "", "producer counts for the enqueue workload (default 1,64,256; 1,64 with -quick)")
	backlog := fs.String("backlog", "", "bytes of 1 KiB messages the backlog workload grows to (default 256MiB, 16MiB with -quick)")
	backlogTime := fs.Duration("backlog-time", 0, "most time a backlog grows (default 60s, 20s with -quick)")
	recovery := fs.String("recovery", "", "log sizes for the recovery workload (default 16MiB,128MiB; 16MiB with -quick)")
	crash := fs.String("crash", "", "bytes of 1 KiB messages in the store the crash workload kills (default 60MiB, 8MiB with -quick)")
	jsonPath := fs.String("json", "", "write one JSON object per result, one per line, to `FILE`")
	chartPath := fs.String("chart", "", "write an SVG bar chart of throughput to `FILE.svg`")
	reportPath := fs.String("report", "", "print the Markdown tables of the results `FILE` written by -json, and run nothing")
	dir := fs.String("dir", os.TempDir(), "directory under which stores are created (put it on the disk to measure)")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	seed := fs.Uint64("seed", 0, "seed of the order in which the systems run in each round (default: from the clock; printed)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("bench: unexpected arguments %q", fs.Args())
	}
	c := fullDefaults
	if *quick {
		c = quickDefaults
	}
	c.idle, c.systems, c.workloads, c.jsonPath, c.chartPath, c.dir, c.quiet = *idle, *systems, *workloads, *jsonPath, *chartPath, *dir, *quiet
	c.reportPath = *reportPath
	if *n > 0 {
		c.n = *n
	}
	if *rounds > 0 {
		c.rounds = *rounds
	}
	if *capD > 0 {
		c.cap = *capD
	}
	if *backlogTime > 0 {
		c.backlogTime = *backlogTime
	}
	c.seed = *seed
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	if *crash != "" {
		n, err := parseSize(*crash)
		if err != nil {
			return nil, err
		}
		c.crash = n
	}
	return &c, c.parseLists(*payloads, *producers, *backlog, *recovery)
}

// parseLists reads the list flags that were given.
func (c *config) parseLists(payloads, producers, backlog, recovery string) error {
	var err error
	if payloads != "" {
		if c.payloads, err = parseInts(payloads, minPayloadSize); err != nil {
			return err
		}
		if slices.Max(c.payloads) > maxPayloadSize {
			return fmt.Errorf("bench: payloads are at most %d bytes", maxPayloadSize)
		}
	}
	if producers != "" {
		if c.producers, err = parseInts(producers, 1); err != nil {
			return err
		}
	}
	if backlog != "" {
		if c.backlog, err = parseSize(backlog); err != nil {
			return err
		}
	}
	if recovery != "" {
		c.recovery = nil
		for _, f := range strings.Split(recovery, ",") {
			n, err := parseSize(f)
			if err != nil {
				return err
			}
			c.recovery = append(c.recovery, n)
		}
	}
	for _, w := range splitList(c.workloads) {
		if !slices.Contains(allWorkloads, w) {
			return fmt.Errorf("bench: unknown workload %q (have %s)", w, strings.Join(allWorkloads, ","))
		}
	}
	return nil
}

// parseInts reads a comma-separated list of sizes or counts, each ≥ least.
func parseInts(s string, least int) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := parseSize(f)
		if err != nil || n < int64(least) {
			return nil, fmt.Errorf("bench: bad value %q (need ≥ %d)", f, least)
		}
		out = append(out, int(n))
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// plan lists the cells of the run in the order they run.
func (c *config) plan() []cell {
	want := func(w string) bool {
		ws := splitList(c.workloads)
		return len(ws) == 0 || slices.Contains(ws, w)
	}
	var cells []cell
	for _, p := range c.payloads {
		if want(wDrain) {
			cells = append(cells, cell{Workload: wDrain, Payload: p, Producers: 1, Consumers: 1})
		}
		if want(wCycle) {
			cells = append(cells, cell{Workload: wCycle, Payload: p, Producers: 4, Consumers: 4})
		}
		for _, n := range c.producers {
			if want(wEnqueue) {
				cells = append(cells, cell{Workload: wEnqueue, Payload: p, Producers: n})
			}
		}
	}
	if want(wSorted) {
		cells = append(cells, cell{Workload: wSorted, Payload: 100, Producers: sortedProducers, Consumers: 1})
	}
	for _, size := range c.recovery {
		if want(wRecovery) {
			cells = append(cells, cell{Workload: wRecovery, Payload: 1024, Producers: recoveryProducers, Consumers: 1, Size: size})
		}
	}
	if want(wCrash) {
		cells = append(cells, cell{Workload: wCrash, Payload: 1024, Producers: recoveryProducers, Consumers: 1, Size: c.crash})
	}
	if want(wBacklog) {
		cells = append(cells, cell{Workload: wBacklog, Payload: 1024, Producers: backlogProducers,
			Consumers: backlogConsumers, Size: c.backlog})
	}
	return cells
}

// run is the harness: parse, run every cell, print and write the results.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if c.reportPath != "" {
		return reportFile(stdout, c.reportPath)
	}
	systems, err := selectSystems(allSystems(), c.systems)
	if err != nil {
		return err
	}
	base, err := os.MkdirTemp(c.dir, "walq-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	progress := stderr
	if c.quiet {
		progress = io.Discard
	}
	m := &matrix{base: base, rounds: c.rounds, log: progress, systems: systems, start: time.Now(),
		opts: runOpts{N: c.n, Cap: c.cap, Idle: c.idle}, order: newRoundOrder(c.seed)}

	writeMachine(stdout, base)
	fmt.Fprintf(stdout, "settings: rounds=%d, -n %d messages or -time %v per run, whichever first; payloads %v\n",
		c.rounds, c.n, c.cap, c.payloads)
	fmt.Fprintf(stdout, "round order: shuffled in every round, -seed %d\n", c.seed)
	writeConfigs(stdout, systems)

	start := time.Now()
	rows := m.runAll(ctx, c, exe)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	writeTable(stdout, rows)
	fmt.Fprintf(stdout, "\ntotal time %v; load average at the end: %s\n", time.Since(start).Round(time.Second), loadAverage())
	if err := writeOutputs(c, rows, systems); err != nil {
		return err
	}
	return checkWalqRows(rows)
}

// runAll runs every cell of the plan.
func (m *matrix) runAll(ctx context.Context, c *config, exe string) []Result {
	var rows []Result
	for _, cl := range c.plan() {
		if ctx.Err() != nil {
			break
		}
		switch cl.Workload {
		case wDrain:
			rows = append(rows, m.runCell(ctx, cl, queueRunner(runDrain))...)
		case wCycle:
			rows = append(rows, m.runCell(ctx, cl, queueRunner(runCycle))...)
		case wEnqueue:
			rows = append(rows, m.runCell(ctx, cl, runEnqueue)...)
		case wSorted:
			rows = append(rows, m.runCell(ctx, cl, runSorted)...)
		case wRecovery:
			rows = append(rows, m.runRecovery(ctx, cl, m.buildClosed(c.backlogTime))...)
		case wCrash:
			rows = append(rows, m.runCrash(ctx, cl, m.buildCrashed(exe, c.backlogTime))...)
		case wBacklog:
			once := *m
			once.rounds = 1 // RSS and disk, not throughput: one round is enough
			rows = append(rows, once.runCell(ctx, cl, backlogRunner(exe, c.backlogTime))...)
		}
	}
	return rows
}

func writeOutputs(c *config, rows []Result, systems []System) error {
	if c.jsonPath != "" {
		if err := writeFile(c.jsonPath, func(w io.Writer) error { return writeJSON(w, rows) }); err != nil {
			return err
		}
	}
	if c.chartPath != "" {
		if err := writeFile(c.chartPath, func(w io.Writer) error { return writeChart(w, rows, systems) }); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, fill func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fill(f); err != nil {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}

// checkWalqRows fails the run when a walq row reports errors; peers' errors
// are printed in their rows but are not walq's to fix.
func checkWalqRows(rows []Result) error {
	var bad []string
	for _, r := range rows {
		if r.Family == "walq" && len(r.Errors) > 0 {
			bad = append(bad, r.System+" "+r.Workload+" "+strconv.Itoa(r.Payload)+"B")
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", errWalqRows, strings.Join(bad, "; "))
	}
	return nil
}
