package main

import (
	"io"
	"slices"
	"testing"
)

func TestQuickPlan(t *testing.T) {
	c, err := parseFlags([]string{"-quick", "-n", "2000"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.n != 2000 || c.rounds != quickDefaults.rounds {
		t.Errorf("n=%d rounds=%d, want 2000 and %d", c.n, c.rounds, quickDefaults.rounds)
	}
	var workloads []string
	for _, cl := range c.plan() {
		if !slices.Contains(workloads, cl.Workload) {
			workloads = append(workloads, cl.Workload)
		}
	}
	for _, w := range allWorkloads {
		if !slices.Contains(workloads, w) {
			t.Errorf("quick plan lacks workload %q", w)
		}
	}
}

func TestFlagFilters(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr bool
		cells   int
	}{
		{"one workload", []string{"-workloads", "cycle", "-payloads", "100,1KiB"}, false, 2},
		{"producers", []string{"-workloads", "enqueue", "-payloads", "100", "-producers", "1,2,3"}, false, 3},
		{"unknown workload", []string{"-workloads", "nope"}, true, 0},
		{"payload too small", []string{"-payloads", "8"}, true, 0},
		{"payload too large", []string{"-payloads", "1MiB"}, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseFlags(tt.args, io.Discard)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err == nil && len(c.plan()) != tt.cells {
				t.Errorf("%d cells, want %d", len(c.plan()), tt.cells)
			}
		})
	}
}

func TestSelectSystems(t *testing.T) {
	all := allSystems()
	got, err := selectSystems(all, "bbolt,fsync/loop,bbolt/batch")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
	}
	if want := []string{"bbolt/update", "bbolt/batch", "bbolt/nosync", "bbolt/tuned", "fsync/loop"}; !slices.Equal(names, want) {
		t.Errorf("selected %v, want %v", names, want)
	}
	if _, err := selectSystems(all, "nope"); err == nil {
		t.Error("an unknown system was accepted")
	}
}
