package wal_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walq/walq/wal"
)

// TestMustReach: a log that ends before Options.MustReach lost records, so
// Open refuses it, changing nothing, even where its tail looks torn; under
// Salvage it reports the loss and resumes after MustReach in a new segment,
// never reusing an LSN.
func TestMustReach(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  func(t *testing.T, tail string) // damages the tail segment
	}{
		{"whole tail", func(t *testing.T, tail string) {}},
		{"torn tail", func(t *testing.T, tail string) {
			b, err := os.ReadFile(tail)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(tail, b[:len(b)-3], 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"tail emptied", func(t *testing.T, tail string) {
			if err := os.Truncate(tail, 0); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, &wal.Options{SegmentSize: 1024})
			appendN(t, l, 0, 60)
			segs := l.Segments()
			for i := 60; segs[len(segs)-1].Bytes < 100; i++ { // a tail with entries
				appendN(t, l, i, 1)
				segs = l.Segments()
			}
			closeLog(t, l)
			tc.cut(t, segs[len(segs)-1].Path)
			const must = 100 // beyond the records (fewer than 70)
			before := dirSnapshot(t, dir)
			_, err := wal.Open(dir, &wal.Options{SegmentSize: 1024, MustReach: must})
			if !errors.Is(err, wal.ErrCorrupt) || !strings.Contains(err.Error(), "before LSN 100") {
				t.Fatalf("Open: %v; want ErrCorrupt saying the log ends before LSN 100", err)
			}
			if after := dirSnapshot(t, dir); after != before {
				t.Fatalf("a refused Open changed the directory:\n%s\n%s", before, after)
			}
			l = openLog(t, dir, &wal.Options{SegmentSize: 1024, MustReach: must, Salvage: true})
			rep := l.Report()
			if rep.Torn != nil || len(rep.Salvaged) == 0 || rep.Salvaged[len(rep.Salvaged)-1].LastLSN != must {
				t.Fatalf("Report = %+v; want the loss up to LSN %d in Salvaged, no torn tail", rep, must)
			}
			lsn, c, err := l.Append([]byte("after"))
			if err == nil {
				err = c.Wait()
			}
			if err != nil || lsn != must+1 {
				t.Fatalf("Append after the loss: LSN %d, %v; want LSN %d", lsn, err, must+1)
			}
			segs = l.Segments()
			if last := segs[len(segs)-1]; last.FirstLSN != must+1 {
				t.Fatalf("the log resumes in %s at LSN %d; want a segment starting at %d", filepath.Base(last.Path), last.FirstLSN, must+1)
			}
			closeLog(t, l)
		})
	}
}

// TestForeignTail: a few bytes of junk in a file named like a segment but
// not where walq's next segment would be is refused, with the file named,
// and never cut; read-only Open refuses it too.
func TestForeignTail(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{SegmentSize: 1024})
	appendN(t, l, 0, 40)
	segs := l.Segments()
	for i := 40; segs[len(segs)-1].Bytes == 0; i++ { // a tail with entries
		appendN(t, l, i, 1)
		segs = l.Segments()
	}
	closeLog(t, l)
	junk := filepath.Join(dir, "00000000000000009999")
	if segs[len(segs)-1].FirstIndex >= 9999 {
		t.Fatalf("the log is longer than the test expects")
	}
	if err := os.WriteFile(junk, []byte("junk\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, o := range []wal.Options{{}, {Salvage: true}, {ReadOnly: true}} {
		_, err := wal.Open(dir, &o)
		if !errors.Is(err, wal.ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(junk)) {
			t.Fatalf("Open(%+v): %v; want ErrCorrupt naming %s", o, err, junk)
		}
	}
	if b, err := os.ReadFile(junk); err != nil || string(b) != "junk\n" {
		t.Fatalf("the junk file was changed: %q, %v", b, err)
	}
}
