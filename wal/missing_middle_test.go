package wal_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/walq/walq/wal"
)

// TestMissingMiddleSegment: a segment file missing between two kept ones
// (the tail holding entries, or empty as a roll leaves it) is a hole no
// open may pass over. An open that does not salvage refuses it
// (ErrCorrupt); one that salvages opens only if it reports the lost
// records; and whatever opens delivers every record at its own LSN, never
// a record of another segment in the hole's place.
func TestMissingMiddleSegment(t *testing.T) {
	for _, c := range []struct {
		name      string
		emptyTail bool
		back      int // which segment goes, counted back from the tail
	}{
		{"before the tail", false, 1},
		{"two before the tail", false, 2},
		{"before an empty tail", true, 1},
		{"two before an empty tail", true, 2},
		{"three before an empty tail", true, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := t.TempDir()
			l := openLog(t, src, &wal.Options{SegmentSize: 4096})
			for i := 0; i < 60; i++ {
				appendN(t, l, 1+10*i, 10)
			}
			closeLog(t, l)
			segs := segmentFiles(t, src)
			if len(segs) < 6 {
				t.Fatalf("%d segments, want 6 or more", len(segs))
			}
			// A writable Open not given the writer's SegmentSize takes the
			// default, larger, under which missing segments pass for a torn
			// roll (README): it is left out.
			for _, o := range []wal.Options{{ReadOnly: true}, {Salvage: true}, {ReadOnly: true, Salvage: true},
				{SegmentSize: 4096}, {ReadOnly: true, SegmentSize: 4096}, {Salvage: true, SegmentSize: 4096},
				{ReadOnly: true, Salvage: true, SegmentSize: 4096}} {
				dir := t.TempDir()
				copyDir(t, src, dir)
				segs := segmentFiles(t, dir)
				if c.emptyTail {
					if err := os.Truncate(segs[len(segs)-1], 0); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Remove(segs[len(segs)-1-c.back]); err != nil {
					t.Fatal(err)
				}
				checkHole(t, dir, o)
			}
		})
	}
}

// checkHole opens dir, a log missing a segment, with o and checks that it
// refuses it, or salvages it saying so and delivers right records.
func checkHole(t *testing.T, dir string, o wal.Options) {
	t.Helper()
	what := fmt.Sprintf("Open(ReadOnly %v, Salvage %v, SegmentSize %d)", o.ReadOnly, o.Salvage, o.SegmentSize)
	l, err := wal.Open(dir, &o)
	if err != nil {
		if !errors.Is(err, wal.ErrCorrupt) {
			t.Errorf("%s of a log missing a segment: %v; want ErrCorrupt", what, err)
		}
		return
	}
	defer l.Close()
	if !o.Salvage {
		t.Errorf("%s of a log missing a segment succeeded; want ErrCorrupt", what)
	} else if len(l.Report().Salvaged) == 0 {
		t.Errorf("%s of a log missing a segment: no loss reported (%+v)", what, l.Report())
	}
	r := l.NewReader(l.FirstLSN())
	defer r.Close()
	for {
		lsn, rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			if !errors.Is(err, wal.ErrCorrupt) {
				t.Errorf("%s: Next: %v", what, err)
			}
			return
		}
		if want := record(int(lsn)); string(rec) != string(want) {
			t.Errorf("%s: LSN %d holds %q; want %q", what, lsn, rec, want)
			return
		}
	}
}
