package main

import (
	"strings"
	"testing"
)

// TestReportFromJSON writes rows as -json does, reads them back, and
// checks that the report lists every system with its ratio and errors.
func TestReportFromJSON(t *testing.T) {
	back := sampleRowsThroughJSON(t)
	var out strings.Builder
	writeReport(&out, back)
	for _, want := range []string{
		"**Durable: full cycle, 4 producers + 4 consumers**",
		"| walq/always | 95k (90k–100k) | 1 |",
		// walq ÷ bbolt per round: 9e4/2e4 = 4.5 and 1e5/2.2e4 = 4.55.
		"| bbolt/batch | 21k (20k–22k) **errors: lost 3** | 4.5 |",
		"| system | 16MiB of payloads, after a clean close |",
		"| walq/always | 16.00ms |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestReportLeavesOutRefsThatDidNotRun checks that a ratio column appears
// only for a reference system that ran in the table's cells, so a results
// file from before a row existed prints as it did.
func TestReportLeavesOutRefsThatDidNotRun(t *testing.T) {
	back := sampleRowsThroughJSON(t)
	var out strings.Builder
	writeReport(&out, back)
	if strings.Contains(out.String(), "walq/stream ÷ it") {
		t.Errorf("the report has a walq/stream column though no walq/stream row ran:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "walq/always ÷ it |\n") {
		t.Errorf("the report lacks its walq/always column at the end of the head:\n%s", out.String())
	}
}

// sampleRowsThroughJSON writes the sample rows as -json does and reads them
// back, checking that every row comes back.
func sampleRowsThroughJSON(t *testing.T) []jsonResult {
	t.Helper()
	rows, _ := sampleRows()
	var b strings.Builder
	if err := writeJSON(&b, rows); err != nil {
		t.Fatal(err)
	}
	back, err := readResults(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(rows) {
		t.Fatalf("read %d rows back, want %d", len(back), len(rows))
	}
	return back
}
