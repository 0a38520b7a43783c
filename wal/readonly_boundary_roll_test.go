package wal_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walq/walq/wal"
)

// TestReadOnlyBoundaryRoll: a roll torn on an entry boundary (the sealed
// segment whole, short of SegmentSize, under the roll's empty tail named
// past it) looks like a missing segment to an open that does not know the
// writer's SegmentSize. A read-only Open must say so as a salvaging one
// does (ErrSegmentSizeUnknown), not refuse it as a missing segment, which
// sends the operator to a repair that refuses it too; given the writer's
// SegmentSize it reports the torn roll, changing nothing, and so does its
// Verify.
func TestReadOnlyBoundaryRoll(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{SegmentSize: 4096})
	appendN(t, l, 1, 5)
	closeLog(t, l)
	tail := filepath.Join(dir, "00000000000000000009") // named past the segment's last entry
	if err := os.WriteFile(tail, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, salvage := range []bool{false, true} {
		_, err := wal.Open(dir, &wal.Options{ReadOnly: true, Salvage: salvage})
		if !errors.Is(err, wal.ErrSegmentSizeUnknown) || !errors.Is(err, wal.ErrCorrupt) {
			t.Errorf("read-only Open (Salvage %v) without SegmentSize: %v; want ErrCorrupt and ErrSegmentSizeUnknown", salvage, err)
		}
		if err != nil && !strings.Contains(err.Error(), "cannot tell which") {
			t.Errorf("read-only Open (Salvage %v): %v; want it to say what it cannot tell", salvage, err)
		}
	}
	l = openLog(t, dir, &wal.Options{ReadOnly: true, SegmentSize: 4096})
	torn := l.Report().Torn
	rep, err := l.Verify()
	closeLog(t, l)
	if torn == nil || !strings.Contains(torn.Reason, "segment roll") {
		t.Errorf("read-only Open given SegmentSize: Report().Torn = %v; want the torn roll", torn)
	}
	if err != nil || rep.Torn == nil || !strings.Contains(rep.Torn.Reason, "segment roll") {
		t.Errorf("Verify of that Log: Torn %v, %v; want the torn roll the next Open repairs, not a clean log", rep.Torn, err)
	}
	if _, err := os.Stat(tail); err != nil {
		t.Errorf("read-only Open changed the directory: %v", err)
	}
}
