package wal_test

import (
	"errors"
	"os"
	"testing"

	"github.com/walq/walq/wal"
)

// TestForeignStartEntry: a NAME.START file whose first entry is valid, CRC
// and all, but is not the log's entry at index NAME (here a copy of the
// first segment: another log's file, or another point of this one, looks
// the same) is no truncation walq began. Finishing it would remove the
// segments up to NAME and put records with other LSNs in their place:
// every Open must refuse it (ErrForeign) and change nothing.
func TestForeignStartEntry(t *testing.T) {
	for _, c := range []struct {
		name    string
		removed int                        // segments a truncation's crash removed already
		start   func(segs []string) string // the START file's name, without .START
	}{
		{"the kept segment listed", 0, func(segs []string) string { return segs[2] }},
		{"inside the kept segment", 0, func(segs []string) string { return segs[2][:len(segs[2])-1] + "9" }},
		{"the kept segment removed", 3, func(segs []string) string { return segs[2] }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, &wal.Options{SegmentSize: 4096})
			for i := 0; i < 60; i++ {
				appendN(t, l, 1+10*i, 10)
			}
			closeLog(t, l)
			segs := segmentFiles(t, dir)
			if len(segs) < 5 {
				t.Fatalf("%d segments, want 5 or more", len(segs))
			}
			other, err := os.ReadFile(segs[0]) // valid entries with other LSNs
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(c.start(segs)+".START", other, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, s := range segs[:c.removed] {
				if err := os.Remove(s); err != nil {
					t.Fatal(err)
				}
			}
			segs = segs[c.removed:]
			before := map[string]string{}
			for _, s := range segs {
				b, err := os.ReadFile(s)
				if err != nil {
					t.Fatal(err)
				}
				before[s] = string(b)
			}
			for _, o := range []wal.Options{{}, {ReadOnly: true}, {Salvage: true}, {ReadOnly: true, Salvage: true}} {
				l, err := wal.Open(dir, &o)
				if err == nil {
					l.Close()
				}
				if !errors.Is(err, wal.ErrCorrupt) || !errors.Is(err, wal.ErrForeign) {
					t.Errorf("Open(ReadOnly %v, Salvage %v) with a START file of other entries: %v, want ErrCorrupt and ErrForeign",
						o.ReadOnly, o.Salvage, err)
				}
				for _, s := range segs {
					if b, err := os.ReadFile(s); err != nil || string(b) != before[s] {
						t.Fatalf("Open(ReadOnly %v, Salvage %v) changed %s: %v", o.ReadOnly, o.Salvage, s, err)
					}
				}
			}
		})
	}
}
