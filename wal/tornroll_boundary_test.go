package wal_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walq/walq/wal"
)

// TestTornRollAtBoundaryReport: a roll whose sealed segment lost its last
// entries whole (a tear on an entry boundary) leaves the segment whole and
// short of SegmentSize under the roll's empty tail. Open removes the tail
// and cuts nothing: the report must say where the segment ends, not that
// it is empty and cut at offset 0, and every record stays readable.
func TestTornRollAtBoundaryReport(t *testing.T) {
	dir := t.TempDir()
	opts := wal.Options{SegmentSize: 4096}
	l := openLog(t, dir, &opts)
	lsns := appendN(t, l, 1, 5)
	closeLog(t, l)
	segs := segmentFiles(t, dir)
	if len(segs) != 1 {
		t.Fatalf("%d segments, want 1", len(segs))
	}
	fi, err := os.Stat(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000009"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, &opts)
	defer closeLog(t, l)
	torn := l.Report().Torn
	if torn == nil {
		t.Fatal("Report().Torn is nil: the torn roll is not reported")
	}
	if torn.Offset != fi.Size() || torn.Bytes != 0 || strings.Contains(torn.Reason, "empty") {
		t.Errorf("Report().Torn = %+v; want offset %d (the segment's whole end), 0 bytes, not called empty", *torn, fi.Size())
	}
	for _, lsn := range lsns {
		if _, err := l.Read(lsn); err != nil {
			t.Errorf("Read(%d) after the repair: %v", lsn, err)
		}
	}
}
