package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// The -report mode turns a -json results file into the Markdown tables the
// project's README quotes, so that every figure there comes from one file:
//
//	go run . -report results/run.jsonl
//
// Every table lists every system that ran the cell; a ratio is the median
// over the rounds of walq's ops/s ÷ the system's ops/s in the same round.

// readResults reads a -json file.
func readResults(r io.Reader) ([]jsonResult, error) {
	var out []jsonResult
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var j jsonResult
		if err := json.Unmarshal(sc.Bytes(), &j); err != nil {
			return nil, fmt.Errorf("bench: results line %d: %w", len(out)+1, err)
		}
		out = append(out, j)
	}
	return out, sc.Err()
}

// reportFile prints the report of the results file at path.
func reportFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rows, err := readResults(f)
	if err != nil {
		return err
	}
	writeReport(w, rows)
	return nil
}

// rateTable is one throughput table of the report.
type rateTable struct {
	title     string
	workload  string
	producers int
	durable   bool     // durable systems, against walq/always; else the others, against walq/never
	refs      []string // the walq systems whose ratios get a column, where they ran
}

func writeReport(w io.Writer, rows []jsonResult) {
	tables := []rateTable{
		{"No fsync: enqueue, 1 producer", "drain.enqueue", 1, false, []string{"walq/never", "walq/never-stream"}},
		{"No fsync: dequeue + ack, 1 consumer", "drain.dequeue", 1, false, []string{"walq/never", "walq/never-stream"}},
		{"No fsync: full cycle, 4 producers + 4 consumers", "cycle", 4, false, []string{"walq/never", "walq/never-stream"}},
		{"Durable: enqueue, 1 producer", "enqueue", 1, true, []string{"walq/always", "walq/stream"}},
		{"Durable: enqueue, 64 producers", "enqueue", 64, true, []string{"walq/always", "walq/stream"}},
		{"Durable: enqueue, 256 producers", "enqueue", 256, true, []string{"walq/always", "walq/stream"}},
		{"Durable: dequeue + ack, 1 consumer", "drain.dequeue", 1, true, []string{"walq/always", "walq/stream"}},
		{"Durable: full cycle, 4 producers + 4 consumers", "cycle", 4, true, []string{"walq/always", "walq/stream"}},
	}
	for _, t := range tables {
		t.write(w, rows)
	}
	writeOpens(w, rows)
	writeBacklog(w, rows)
	writeSorted(w, rows)
}

// payloadsOf lists the payload sizes of a workload's rows, in file order.
func payloadsOf(rows []jsonResult, workload string) []int {
	var out []int
	for _, r := range rows {
		if r.Workload == workload && !slices.Contains(out, r.Payload) {
			out = append(out, r.Payload)
		}
	}
	return out
}

// find returns the row of system in a cell, or nil.
func find(rows []jsonResult, system, workload string, payload, producers int) *jsonResult {
	for i, r := range rows {
		if r.System == system && r.Workload == workload && r.Payload == payload && r.Producers == producers {
			return &rows[i]
		}
	}
	return nil
}

func (t rateTable) write(w io.Writer, rows []jsonResult) {
	payloads := payloadsOf(rows, t.workload)
	var systems []string
	for _, r := range rows {
		if r.Workload == t.workload && r.Producers == t.producers && t.durable == (r.Reference == "walq/always") &&
			!slices.Contains(systems, r.System) {
			systems = append(systems, r.System)
		}
	}
	if len(systems) == 0 {
		return
	}
	t.refs = slices.DeleteFunc(slices.Clone(t.refs), func(ref string) bool { return !slices.Contains(systems, ref) })
	fmt.Fprintf(w, "\n**%s** (messages/s, median of the rounds, and min–max)\n\n", t.title)
	head, rule := "| system |", "|---|"
	for _, p := range payloads {
		head += fmt.Sprintf(" %s |", sizeString(int64(p)))
		rule += "---|"
		for _, ref := range t.refs {
			head += fmt.Sprintf(" %s ÷ it |", ref)
			rule += "---|"
		}
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, rule)
	for _, s := range systems {
		line := "| " + s + " |"
		for _, p := range payloads {
			r := find(rows, s, t.workload, p, t.producers)
			line += " " + rateCell(r) + " |"
			for _, ref := range t.refs {
				line += " " + ratioCell(find(rows, ref, t.workload, p, t.producers), r) + " |"
			}
		}
		fmt.Fprintln(w, line)
	}
}

// rateCell prints a row's median rate, its range, and its errors.
func rateCell(r *jsonResult) string {
	if r == nil {
		return ""
	}
	s := fmt.Sprintf("%s (%s–%s)", humanOps(r.OpsPerSec), humanOps(r.OpsMin), humanOps(r.OpsMax))
	if len(r.Errors) > 0 {
		s += " **errors: " + strings.Join(r.Errors, "; ") + "**"
	}
	return s
}

// ratioCell is the median over the rounds of a's ops/s ÷ b's ops/s in the
// same round; "1" for the same row, "" when either did not run.
func ratioCell(a, b *jsonResult) string {
	if a == nil || b == nil {
		return ""
	}
	if a.System == b.System {
		return "1"
	}
	var rs []float64
	for i := range min(len(a.OpsRounds), len(b.OpsRounds)) {
		if b.OpsRounds[i] > 0 {
			rs = append(rs, a.OpsRounds[i]/b.OpsRounds[i])
		}
	}
	if len(rs) == 0 {
		return ""
	}
	return ratioString3(median(rs))
}

// ratioString3 prints a ratio with two significant digits: 0.41, 3.2, 12.
func ratioString3(x float64) string {
	switch {
	case x >= 10:
		return fmt.Sprintf("%.0f", x)
	case x >= 1:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2g", x)
	}
}

// writeOpens prints the open times: after a clean close (recovery, one
// column per size) and after a kill (crash).
func writeOpens(w io.Writer, rows []jsonResult) {
	type col struct {
		workload string
		size     int64
	}
	var cols []col
	var systems []string
	for _, r := range rows {
		if r.Workload != wRecovery && r.Workload != wCrash {
			continue
		}
		if c := (col{r.Workload, r.SizeBytes}); !slices.Contains(cols, c) {
			cols = append(cols, c)
		}
		if !slices.Contains(systems, r.System) {
			systems = append(systems, r.System)
		}
	}
	if len(cols) == 0 {
		return
	}
	fmt.Fprintf(w, "\n**Open, up to the first message** (median of the rounds; 1 KiB messages)\n\n")
	head, rule := "| system |", "|---|"
	for _, c := range cols {
		what := "after a clean close"
		if c.workload == wCrash {
			what = "after kill -9"
		}
		head += fmt.Sprintf(" %s of payloads, %s |", sizeString(c.size), what)
		rule += "---|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, rule)
	for _, s := range systems {
		line := "| " + s + " |"
		for _, c := range cols {
			line += " " + openCell(rows, s, c.workload, c.size) + " |"
		}
		fmt.Fprintln(w, line)
	}
	for _, r := range rows {
		if r.Workload == wCrash && r.Note != "" {
			fmt.Fprintf(w, "\n%s after kill -9: %s.\n", r.System, r.Note)
		}
	}
}

func openCell(rows []jsonResult, system, workload string, size int64) string {
	for _, r := range rows {
		if r.System == system && r.Workload == workload && r.SizeBytes == size {
			s := durString(time.Duration(r.OpenMs * 1e6))
			if len(r.Errors) > 0 {
				s += " **errors: " + strings.Join(r.Errors, "; ") + "**"
			}
			return s
		}
	}
	return ""
}

// writeBacklog prints the backlog workload: memory, open and disk.
func writeBacklog(w io.Writer, rows []jsonResult) {
	phase := func(system, ph string) *jsonResult {
		for i, r := range rows {
			if r.System == system && r.Workload == wBacklog+"."+ph {
				return &rows[i]
			}
		}
		return nil
	}
	var systems []string
	var size int64
	for _, r := range rows {
		if r.Workload == wBacklog+".grow" {
			systems, size = append(systems, r.System), r.SizeBytes
		}
	}
	if len(systems) == 0 {
		return
	}
	fmt.Fprintf(w, "\n**Backlog of %s of 1 KiB messages** (16 producers, then 8 consumers; one round, in child processes)\n\n", sizeString(size))
	fmt.Fprintln(w, "| system | messages | grow, msgs/s | peak RSS growing (anon) | open | RSS after open (anon) | drain, msgs/s | peak RSS draining (anon) | disk full | disk after the drain |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range systems {
		g, o, d := phase(s, "grow"), phase(s, "open"), phase(s, "drain")
		if g == nil || o == nil || d == nil {
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s (%s) | %s | %s (%s) | %s | %s (%s) | %s | %s |%s\n", s, g.Messages,
			humanOps(g.OpsPerSec), bytesOrDash(g.RSSBytes), bytesOrDash(g.AnonRSS),
			durString(time.Duration(o.OpenMs*1e6)), bytesOrDash(o.RSSBytes), bytesOrDash(o.AnonRSS),
			humanOps(d.OpsPerSec), bytesOrDash(d.RSSBytes), bytesOrDash(d.AnonRSS),
			diskString(g.DiskBytes), diskString(d.DiskBytes), backlogErrors(g, o, d))
	}
}

func backlogErrors(rs ...*jsonResult) string {
	var e []string
	for _, r := range rs {
		e = append(e, r.Errors...)
	}
	if len(e) == 0 {
		return ""
	}
	return " **errors: " + strings.Join(e, "; ") + "**"
}

// writeSorted prints walq's sorted queue.
func writeSorted(w io.Writer, rows []jsonResult) {
	var lines []string
	for _, r := range rows {
		if strings.HasPrefix(r.Workload, wSorted+".") {
			lines = append(lines, fmt.Sprintf("| %s | %s | %s |", r.System, r.Workload, rateCell(&r)))
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "\n**Sorted queue** (walq only; 16 publishers over 1000 keys, then pulls of about 100 values; values/s)\n\n")
	fmt.Fprintln(w, "| system | phase | values/s |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}
