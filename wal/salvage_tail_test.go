package wal_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/walq/walq/wal"
)

// TestSalvageUnderEmptyTail: damage inside the last sealed segment, under
// the empty tail segment a roll leaves (a compaction's, or a crash right
// after a roll), is salvaged like damage anywhere else: the damaged entry
// still counts towards the index the tail is named after, so the tail is
// walq's own and a salvaging Open (read-only too) opens and reports the
// one damaged region; after damage in the middle, it appends after the
// last record.
func TestSalvageUnderEmptyTail(t *testing.T) {
	for _, e := range []struct {
		name string
		pick func(lay []entryPos) entryPos
		next wal.LSN // the LSN of the next record; 0: not checked (a lost last entry's LSNs are unknown)
	}{
		{"middle entry", func(lay []entryPos) entryPos { return lay[len(lay)-3] }, harnessRecords + 1},
		{"last entry", func(lay []entryPos) entryPos { return lay[len(lay)-1] }, 0},
	} {
		t.Run(e.name, func(t *testing.T) {
			src, lay := pristine(t)
			dir := t.TempDir()
			copyDir(t, src, dir)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d", len(lay)+1)), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			bad := e.pick(lay)
			flipBit(t, filepath.Join(dir, filepath.Base(bad.seg)), bad.off+bad.size-1)
			for _, ro := range []bool{true, false} {
				opts := harnessOpts
				opts.Salvage, opts.ReadOnly = true, ro
				l, err := wal.Open(dir, &opts)
				if err != nil {
					t.Fatalf("salvaging Open (read-only %v): %v", ro, err)
				}
				if rep := l.Report(); len(rep.Salvaged) != 1 || rep.Salvaged[0].FirstLSN != bad.first {
					t.Errorf("read-only %v: Salvaged = %+v, want the entry of LSN %d", ro, rep.Salvaged, bad.first)
				}
				if !ro && e.next != 0 {
					if lsn := appendN(t, l, harnessRecords, 1)[0]; lsn != e.next {
						t.Errorf("next LSN %d, want %d", lsn, e.next)
					}
				}
				closeLog(t, l)
			}
		})
	}
}
