package crashfs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/walq/walq/internal/crashfs"
)

func TestMayRefuse(t *testing.T) {
	root := t.TempDir()
	log := filepath.Join(root, "q", "log")
	if err := os.MkdirAll(log, 0o700); err != nil {
		t.Fatal(err)
	}
	sealed, tail := "00000000000000000001", "00000000000000000042"
	for _, name := range []string{sealed, tail, "FRONT"} {
		if err := os.WriteFile(filepath.Join(log, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rel := func(name string) string { return filepath.Join("q", "log", name) }
	for _, c := range []struct {
		name string
		st   crashfs.State
		want bool
	}{
		{"no hole", crashfs.State{}, false},
		{"a hole that is damage", crashfs.State{Holes: true, Holed: []string{rel(tail)}}, true},
		{"a torn write over the tail's zeros", crashfs.State{Holes: true, OverZeros: true, Holed: []string{rel(tail)}}, false},
		{"over zeros in a segment another follows", crashfs.State{Holes: true, OverZeros: true, Holed: []string{rel(sealed)}}, true},
		{"over zeros in a file that is no segment", crashfs.State{Holes: true, OverZeros: true, Holed: []string{rel("FRONT")}}, false},
	} {
		if got := c.st.MayRefuse(root); got != c.want {
			t.Errorf("%s: MayRefuse = %v, want %v", c.name, got, c.want)
		}
	}
}
