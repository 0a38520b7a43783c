package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// writeMachine prints what the figures were measured on.
func writeMachine(w io.Writer, base string) {
	fmt.Fprintf(w, "machine: %s, %d CPUs, %s/%s, %s\n", cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Fprintf(w, "stores under: %s (%s)\n", base, filesystemOf(base))
	fmt.Fprintf(w, "load average at the start: %s\n", loadAverage())
}

// loadAverage returns the 1, 5 and 15 minute load averages from
// /proc/loadavg: on a shared machine they say how loaded it was.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// cpuModel returns the CPU's model name from /proc/cpuinfo, or "unknown CPU".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// filesystemOf returns the type and device of the mount holding path, from
// /proc/self/mounts (the longest mount point that prefixes path).
func filesystemOf(path string) string {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return "unknown filesystem"
	}
	best, out := -1, "unknown filesystem"
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasPrefix(path, f[1]) || len(f[1]) <= best {
			continue
		}
		best, out = len(f[1]), f[2]+" on "+f[0]
	}
	return out
}

// writeConfigs prints every system's configuration, as the hint of a
// typical cell shapes it (bbolt's batch size follows the cell's callers).
func writeConfigs(w io.Writer, systems []System) {
	fmt.Fprintln(w, "systems:")
	for _, s := range systems {
		fmt.Fprintf(w, "  %-16s %s\n", s.Name, s.Config(Hint{Producers: 4, Consumers: 4, Payload: 100}))
	}
}

// writeTable prints the rows cell by cell.
func writeTable(w io.Writer, rows []Result) {
	for i := 0; i < len(rows); {
		j := i
		for j < len(rows) && sameCell(rows[i], rows[j]) {
			j++
		}
		writeCell(w, rows[i:j])
		i = j
	}
}

func sameCell(a, b Result) bool {
	return a.Workload == b.Workload && a.Payload == b.Payload && a.Producers == b.Producers &&
		a.Consumers == b.Consumers && a.Size == b.Size
}

func writeCell(w io.Writer, rows []Result) {
	r0 := rows[0]
	title := fmt.Sprintf("%s, %s payload, %d producers, %d consumers", r0.Workload, sizeString(int64(r0.Payload)), r0.Producers, r0.Consumers)
	if r0.Size > 0 {
		title += ", " + sizeString(r0.Size)
	}
	fmt.Fprintf(w, "\n== %s (%d rounds) ==\n", title, r0.Rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tops/s\tmin–max\tvs walq\tp50\tp99\tmsgs\topen\tRSS\tanon\tdisk\t errors")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s–%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t %s\n",
			r.System, humanOps(r.OpsPerSec), humanOps(r.OpsMin), humanOps(r.OpsMax), ratioString(r),
			durString(r.P50), durString(r.P99), r.Messages, durString(r.Open), bytesOrDash(r.RSS),
			bytesOrDash(r.AnonRSS), diskString(r.Disk), errorsString(r.Errors))
	}
	tw.Flush()
}

func ratioString(r Result) string {
	if math.IsNaN(r.Ratio) {
		if r.System == r.Reference {
			return "1 (ref)"
		}
		return "-"
	}
	return fmt.Sprintf("%.2f× %s", r.Ratio, strings.TrimPrefix(r.Reference, "walq/"))
}

func errorsString(e []string) string {
	if len(e) == 0 {
		return "ok"
	}
	return "ERRORS: " + joinProblems(e)
}

// humanOps prints a rate with three significant digits: 6.91k, 412k, 1.2M.
func humanOps(x float64) string {
	switch {
	case math.IsNaN(x):
		return "-"
	case x >= 1e6:
		return fmt.Sprintf("%.3gM", x/1e6)
	case x >= 1e3:
		return fmt.Sprintf("%.3gk", x/1e3)
	default:
		return fmt.Sprintf("%.3g", x)
	}
}

func durString(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

func bytesOrDash(n int64) string {
	if n <= 0 {
		return "-"
	}
	return sizeString(n)
}

// diskString prints bytes on disk; 0 is a figure, negative is "not measured".
func diskString(n int64) string {
	if n < 0 {
		return "-"
	}
	return sizeString(n)
}
