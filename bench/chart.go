package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// The -chart file is an SVG drawn by hand: one group of bars per throughput
// cell (workload, payload, producers, consumers), one bar per system, on a
// log scale, since the systems differ by orders of magnitude. Open times
// (recovery, crash, backlog.open) are left out: they are durations, not rates.

// Layout of the chart, in SVG user units (pixels).
const (
	chartBar      = 11  // bar width
	chartGap      = 18  // space between groups
	chartLeft     = 130 // room for the axis labels and the first rotated group label
	chartTop      = 70  // room for the title
	chartPlot     = 360 // plot height
	chartBottom   = 130 // room for the group labels
	chartLegendW  = 190 // legend column
	chartMinWidth = 760 // room for the title
)

// familyColors holds a base colour per family; modes of a family are drawn
// in lighter shades of it.
var familyColors = map[string][3]int{
	"walq":      {0xd9, 0x48, 0x01},
	"dque":      {0x31, 0x82, 0xbd},
	"bbolt":     {0x31, 0xa3, 0x54},
	"jetstream": {0x75, 0x6b, 0xb1},
	"fsync":     {0x63, 0x63, 0x63},
	"tidwall":   {0x8c, 0x6d, 0x31},
	"goqite":    {0x17, 0xbe, 0xcf},
}

// chartable reports whether a row is a rate that belongs on the chart.
func chartable(r Result) bool {
	return !strings.HasPrefix(r.Workload, wRecovery) && r.Workload != wCrash && r.Workload != wBacklog+".open" &&
		r.OpsPerSec > 0
}

// writeChart draws rows; systems fixes the order and colour of the bars.
func writeChart(w io.Writer, rows []Result, systems []System) error {
	groups := chartGroups(rows)
	if len(groups) == 0 {
		return fmt.Errorf("bench: nothing to chart")
	}
	colors := systemColors(systems)
	lo, hi := chartRange(rows)
	width := chartLeft + chartLegendW + 20
	for _, g := range groups {
		width += len(g)*chartBar + chartGap
	}
	width = max(width, chartMinWidth)
	height := chartTop + chartPlot + chartBottom
	b := &strings.Builder{}
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(b, `<text x="%d" y="24" font-size="15" font-weight="bold">walq and its peers: throughput by system and workload</text>`+"\n", chartLeft)
	fmt.Fprintf(b, `<text x="%d" y="42">ops/s, log scale · bar: median of the rounds · whisker: min–max · Np/Mc: producers/consumers</text>`+"\n", chartLeft)
	drawAxis(b, lo, hi, width-chartLegendW-20)
	x := chartLeft + chartGap/2
	for _, g := range groups {
		drawGroup(b, g, x, lo, hi, colors)
		x += len(g)*chartBar + chartGap
	}
	drawLegend(b, systems, colors, width-chartLegendW)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// chartGroups splits the chartable rows into cells, in report order.
func chartGroups(rows []Result) [][]Result {
	var groups [][]Result
	for _, r := range rows {
		if !chartable(r) {
			continue
		}
		if n := len(groups); n > 0 && sameCell(groups[n-1][0], r) {
			groups[n-1] = append(groups[n-1], r)
			continue
		}
		groups = append(groups, []Result{r})
	}
	return groups
}

// chartRange returns the decades spanned by the rows' rates.
func chartRange(rows []Result) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		if !chartable(r) {
			continue
		}
		lo = min(lo, math.Floor(math.Log10(max(r.OpsMin, 1))))
		hi = max(hi, math.Ceil(math.Log10(max(r.OpsMax, 10))))
	}
	return lo, max(hi, lo+1)
}

// yOf maps a rate to its height on the plot.
func yOf(v, lo, hi float64) float64 {
	f := (math.Log10(max(v, 1)) - lo) / (hi - lo)
	f = min(max(f, 0), 1)
	return chartTop + chartPlot - f*chartPlot
}

func drawAxis(b *strings.Builder, lo, hi float64, right int) {
	for d := lo; d <= hi; d++ {
		y := yOf(math.Pow(10, d), lo, hi)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ccc"/>`+"\n", chartLeft, y, right, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", chartLeft-6, y+4, humanOps(math.Pow(10, d)))
	}
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", chartLeft, chartTop, chartLeft, chartTop+chartPlot)
}

func drawGroup(b *strings.Builder, g []Result, x int, lo, hi float64, colors map[string]string) {
	base := float64(chartTop + chartPlot)
	for i, r := range g {
		bx := float64(x + i*chartBar)
		y := yOf(r.OpsPerSec, lo, hi)
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s: %s ops/s (%s–%s)</title></rect>`+"\n",
			bx, y, chartBar-1, base-y, colors[r.System], html.EscapeString(r.System), humanOps(r.OpsPerSec), humanOps(r.OpsMin), humanOps(r.OpsMax))
		cx := bx + float64(chartBar-1)/2
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black" stroke-width="0.8"/>`+"\n",
			cx, yOf(r.OpsMin, lo, hi), cx, yOf(r.OpsMax, lo, hi))
		if len(r.Errors) > 0 {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="red" font-weight="bold">!</text>`+"\n", cx, y-4)
		}
	}
	r := g[0]
	label := fmt.Sprintf("%s %s %dp/%dc", r.Workload, sizeString(int64(r.Payload)), r.Producers, r.Consumers)
	lx := float64(x) + float64(len(g)*chartBar)/2
	ly := float64(chartTop + chartPlot + 12)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" transform="rotate(-40 %.1f %.1f)">%s</text>`+"\n",
		lx, ly, lx, ly, html.EscapeString(label))
}

func drawLegend(b *strings.Builder, systems []System, colors map[string]string, x int) {
	y := chartTop
	for _, s := range systems {
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`, x, y, colors[s.Name])
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", x+18, y+10, html.EscapeString(s.Name))
		y += 18
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" fill="red">! = errors in the run</text>`+"\n", x, y+10)
}

// systemColors gives each system its family's colour, lighter for each
// further mode of the family.
func systemColors(systems []System) map[string]string {
	out := make(map[string]string)
	seen := make(map[string]int)
	for _, s := range systems {
		c, ok := familyColors[s.Family]
		if !ok {
			c = [3]int{0x99, 0x99, 0x99}
		}
		k := float64(seen[s.Family]) * 0.3
		seen[s.Family]++
		mix := func(v int) int { return int(float64(v) + (255-float64(v))*min(k, 0.75)) }
		out[s.Name] = fmt.Sprintf("#%02x%02x%02x", mix(c[0]), mix(c[1]), mix(c[2]))
	}
	return out
}
