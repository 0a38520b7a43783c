package wal_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/walq/walq/wal"
)

// TestFrontMarkerListing: FrontMarker names the highest NAME.FRONT marker of a
// log directory and says whether a segment lies before it (one that
// finishing the truncation removes), ignoring what Open ignores; it reads
// only names, and changes nothing.
func TestFrontMarkerListing(t *testing.T) {
	n := func(i uint64) string { return fmt.Sprintf("%020d", i) }
	for _, c := range []struct {
		name    string
		files   []string
		dirs    []string
		marker  string
		removes bool
	}{
		{"no marker", []string{n(1), n(5)}, nil, "", false},
		{"marker on the first segment", []string{n(1), n(5), n(1) + ".FRONT"}, nil, n(1) + ".FRONT", false},
		{"marker past a segment", []string{n(1), n(5), n(5) + ".FRONT"}, nil, n(5) + ".FRONT", true},
		{"the highest of two", []string{n(1), n(5), n(9), n(5) + ".FRONT", n(9) + ".FRONT"}, nil, n(9) + ".FRONT", true},
		{"segments gone before it", []string{n(5), n(9), n(5) + ".FRONT"}, nil, n(5) + ".FRONT", false},
		{"other files and directories ignored", []string{n(5), n(5) + ".FRONT", "notes", n(0), n(1) + ".TEMP"}, []string{n(1)}, n(5) + ".FRONT", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range c.files {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for _, d := range c.dirs {
				if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			marker, removes, err := wal.FrontMarker(nil, dir)
			if err != nil || marker != c.marker || removes != c.removes {
				t.Errorf("FrontMarker: %q, %v, %v; want %q, %v", marker, removes, err, c.marker, c.removes)
			}
			if des, _ := os.ReadDir(dir); len(des) != len(c.files)+len(c.dirs) {
				t.Errorf("the directory holds %d entries after FrontMarker, want %d", len(des), len(c.files)+len(c.dirs))
			}
		})
	}
	if _, _, err := wal.FrontMarker(nil, filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("FrontMarker of a missing directory: no error")
	}
}
