package wal_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/walq/walq/wal"
)

// TestSalvageTornRollNotTornShaped covers a roll whose sealed segment a
// power loss left shorter than the roll wrote it (the empty tail is named
// past every entry its bytes can hold) and damaged with bytes that do not
// bear the mark of a write that never reached the disk (garbage, not zeros
// or a frame the file's end cuts). Its bytes cannot tell a torn write from
// a synced entry that rotted before the crash lost the rest. A plain Open
// cuts it as a torn roll; a salvaging Open must keep the same records and
// open too, but never give out again an LSN the damaged entries had; when
// nothing in the log tells their LSNs, it refuses, saying what to do.
func TestSalvageTornRollNotTornShaped(t *testing.T) {
	const segSize = 4096
	garbage := make([]byte, 181)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	garbage[0] = 0x5b // a frame length the file holds: not cut by its end
	for _, c := range []struct {
		name      string
		keepFirst bool // the damaged segment keeps its first entry whole
		dropFront bool // the segments before it are gone (truncated front)
	}{
		{"damaged from its start", false, false},
		{"after its first entry", true, false},
		{"first segment of the log", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := t.TempDir()
			sealedLast, damagedFirst, firstEntry := buildRolled(t, src, segSize)
			segs := segmentFiles(t, src)
			b := slices.Clone(garbage)
			if c.keepFirst {
				b = append(slices.Clone(firstEntry), garbage...)
			}
			if err := os.WriteFile(segs[1], b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(segs[2], 0); err != nil { // the roll's tail, its witness lost
				t.Fatal(err)
			}
			if c.dropFront {
				if err := os.Remove(segs[0]); err != nil {
					t.Fatal(err)
				}
			}
			plainDir, salvageDir := t.TempDir(), t.TempDir()
			copyDir(t, src, plainDir)
			copyDir(t, src, salvageDir)

			plain := openLog(t, plainDir, &wal.Options{SegmentSize: segSize})
			if plain.Report().Torn == nil {
				t.Fatalf("plain Open found no torn roll: %+v", plain.Report())
			}
			want, _ := readAll(t, plain, plain.FirstLSN())
			closeLog(t, plain)

			s, err := wal.Open(salvageDir, &wal.Options{SegmentSize: segSize, Salvage: true})
			if c.dropFront {
				if err == nil {
					closeLog(t, s)
					t.Fatal("salvaging Open opened a damaged end whose LSNs nothing tells")
				}
				if !errors.Is(err, wal.ErrCorrupt) || !strings.Contains(err.Error(), "Options.StartLSN") {
					t.Fatalf("salvaging Open = %v, want ErrCorrupt that says what to do", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("salvaging Open = %v where the plain Open cut a torn roll", err)
			}
			defer closeLog(t, s)
			got, _ := readAll(t, s, s.FirstLSN())
			if !slices.Equal(got, want) {
				t.Fatalf("salvaging Open keeps LSNs %v, the plain Open %v", got, want)
			}
			next := appendN(t, s, 1, 1)[0]
			from := damagedFirst
			if c.keepFirst {
				from++
			}
			if next <= sealedLast {
				t.Fatalf("next LSN %d: the damaged entries held LSNs %d-%d, which may have been synced; report %+v",
					next, from, sealedLast, s.Report())
			}
			if !covered(s.Report().Salvaged, from, sealedLast) {
				t.Fatalf("the report does not say LSNs %d-%d were lost: %+v", from, sealedLast, s.Report())
			}
		})
	}
}

// buildRolled writes records of one entry each into dir until a roll
// leaves a third, empty segment, and closes the log. It returns the last
// LSN of the second segment, its first, and its first entry's frame.
func buildRolled(t *testing.T, dir string, segSize int64) (last, first wal.LSN, entry []byte) {
	t.Helper()
	l := openLog(t, dir, &wal.Options{SegmentSize: segSize})
	for i := 0; len(segmentFiles(t, dir)) < 3; i++ {
		appendN(t, l, i, 1)
	}
	closeLog(t, l)
	segs := segmentFiles(t, dir)
	var mid []entryPos
	for _, e := range recordEntries(layoutOf(t, dir)) {
		if e.seg == segs[1] {
			mid = append(mid, e)
		}
	}
	b, err := os.ReadFile(segs[1])
	if err != nil {
		t.Fatal(err)
	}
	e := mid[len(mid)-1]
	return e.first + wal.LSN(e.count) - 1, mid[0].first, b[mid[0].off : mid[0].off+mid[0].size]
}

// covered reports whether the damage ds reports every LSN from first to
// last lost.
func covered(ds []wal.Damage, first, last wal.LSN) bool {
	for _, d := range ds {
		if d.FirstLSN <= first && d.LastLSN >= last {
			return true
		}
	}
	return false
}
