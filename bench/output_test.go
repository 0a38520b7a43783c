package main

import (
	"bufio"
	"encoding/json"
	"encoding/xml"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

func sampleRows() ([]Result, []System) {
	systems := []System{
		{Name: "walq/always", Family: "walq", Mode: "always", Config: func(Hint) string { return "" }},
		{Name: "bbolt/batch", Family: "bbolt", Mode: "batch", Config: func(Hint) string { return "" }},
	}
	rows := []Result{
		{System: "walq/always", Family: "walq", Mode: "always", Workload: wCycle, Payload: 100, Producers: 4, Consumers: 4,
			Rounds: 2, Ops: []float64{9e4, 1e5}, OpsPerSec: 95e3, OpsMin: 9e4, OpsMax: 1e5, P50: 300 * time.Microsecond,
			P99: 2 * time.Millisecond, Disk: 4096, Reference: "walq/always", Ratio: math.NaN()},
		{System: "bbolt/batch", Family: "bbolt", Mode: "batch", Workload: wCycle, Payload: 100, Producers: 4, Consumers: 4,
			Rounds: 2, Ops: []float64{2e4, 2.2e4}, OpsPerSec: 21e3, OpsMin: 2e4, OpsMax: 2.2e4, Disk: 1 << 20,
			Reference: "walq/always", Ratio: 0.22, Errors: []string{"lost 3"}},
		{System: "walq/always", Family: "walq", Mode: "always", Workload: wRecovery, Payload: 1024, Size: 16 << 20,
			Rounds: 2, Ops: []float64{1e6, 1e6}, OpsPerSec: 1e6, Open: 16 * time.Millisecond, Ratio: math.NaN()},
	}
	return rows, systems
}

func TestJSONHasEveryField(t *testing.T) {
	rows, _ := sampleRows()
	var b strings.Builder
	if err := writeJSON(&b, rows); err != nil {
		t.Fatal(err)
	}
	want := []string{"system", "workload", "mode", "payload", "producers", "consumers", "ops_per_sec",
		"p50_us", "p99_us", "rss_bytes", "disk_bytes", "errors"}
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	lines := 0
	for sc.Scan() {
		lines++
		var obj map[string]any
		if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
			t.Fatalf("line %d is not JSON: %v", lines, err)
		}
		for _, f := range want {
			if _, ok := obj[f]; !ok {
				t.Errorf("line %d lacks %q", lines, f)
			}
		}
	}
	if lines != len(rows) {
		t.Errorf("%d lines, want one per row (%d)", lines, len(rows))
	}
}

func TestChartIsWellFormedSVG(t *testing.T) {
	rows, systems := sampleRows()
	var b strings.Builder
	if err := writeChart(&b, rows, systems); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(strings.NewReader(b.String()))
	bars := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			for _, a := range se.Attr {
				if a.Name.Local == "fill" && a.Value != "white" {
					bars++
				}
			}
		}
	}
	// Two bars (recovery is a duration, not charted) and two legend swatches.
	if bars != 4 {
		t.Errorf("%d coloured rects, want 4", bars)
	}
}

func TestTableShowsErrorsAndRatios(t *testing.T) {
	rows, _ := sampleRows()
	var b strings.Builder
	writeTable(&b, rows)
	for _, want := range []string{"ERRORS: lost 3", "0.22× always", "1 (ref)", "16.00ms"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
