package main

import "testing"

// TestGoqitePragmas checks that each goqite system runs with the settings
// its configuration line states.
func TestGoqitePragmas(t *testing.T) {
	tests := []struct {
		synchronous string
		want        int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{{"FULL", 2}, {"NORMAL", 1}}
	for _, tt := range tests {
		t.Run(tt.synchronous, func(t *testing.T) {
			g, err := openGoqite(t.TempDir(), tt.synchronous)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			var sync int
			var journal string
			if err := g.db.QueryRow("pragma synchronous").Scan(&sync); err != nil {
				t.Fatal(err)
			}
			if err := g.db.QueryRow("pragma journal_mode").Scan(&journal); err != nil {
				t.Fatal(err)
			}
			if sync != tt.want || journal != "wal" {
				t.Errorf("synchronous=%d journal_mode=%s, want %d and wal", sync, journal, tt.want)
			}
		})
	}
}
