package main

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// fileWord matches a file name as README.md writes one: letters, digits,
// '_', '.' and '-', optionally followed by a brace list of endings, as in
// `run.{txt,jsonl}`.
var fileWord = regexp.MustCompile(`[\w.-]+(?:\{[\w.,-]+\})?`)

// namedFiles returns every file name the text writes, with a brace list
// expanded into one name per ending and a sentence's final dot dropped.
func namedFiles(text string) map[string]bool {
	names := make(map[string]bool)
	for _, w := range fileWord.FindAllString(text, -1) {
		open := strings.IndexByte(w, '{')
		if open < 0 {
			names[strings.TrimRight(w, ".")] = true
			continue
		}
		for _, end := range strings.Split(strings.TrimSuffix(w[open+1:], "}"), ",") {
			names[w[:open]+end] = true
		}
	}
	return names
}

func TestNamedFiles(t *testing.T) {
	got := namedFiles("`a.{txt,jsonl}`, `results/b-2.txt`. The run.txt.\n")
	for _, want := range []string{"a.txt", "a.jsonl", "b-2.txt", "run.txt"} {
		if !got[want] {
			t.Errorf("%q not found in %v", want, got)
		}
	}
	if got["run"] || got["a.{txt,jsonl}"] {
		t.Errorf("a stem or an unexpanded list counted as a name: %v", got)
	}
}

// TestReadmeNamesEveryResult checks that README.md names every file of
// results/ by its whole name (or in a brace list), so that each file there
// has an entry saying what it measured.
func TestReadmeNamesEveryResult(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("results")
	if err != nil {
		t.Fatal(err)
	}
	named := namedFiles(string(readme))
	var missing []string
	for _, e := range entries {
		if !e.IsDir() && !named[e.Name()] {
			missing = append(missing, e.Name())
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("README.md names %d of the %d files in results/ nowhere; add an entry for each:\n  %s",
			len(missing), len(entries), strings.Join(missing, "\n  "))
	}
}

// reportCommand matches the command the project's README gives for its
// performance tables: go run . -report results/NAME.jsonl.
var reportCommand = regexp.MustCompile("`go run \\. -report (results/[\\w.-]+\\.jsonl)`")

// TestReadmeTablesAreTheReport checks that the project's README shows the
// tables of the results file it names as -report prints them, unedited:
// a figure changed by hand, or a table left from another run, fails it.
func TestReadmeTablesAreTheReport(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := reportCommand.FindSubmatch(readme)
	if m == nil {
		t.Fatal("../README.md names no `go run . -report results/….jsonl` for its tables")
	}
	var report strings.Builder
	if err := reportFile(&report, string(m[1])); err != nil {
		t.Fatal(err)
	}
	for _, table := range strings.Split(strings.TrimSpace(report.String()), "\n\n") {
		if !strings.Contains(string(readme), table) {
			t.Errorf("../README.md lacks this part of `go run . -report %s`, or shows it edited:\n%s", m[1], table)
		}
	}
}
