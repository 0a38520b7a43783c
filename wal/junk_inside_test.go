package wal_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walq/walq/wal"
)

// TestJunkNamedInsideSegment: a file with a segment's name and no valid
// entry, named below the index walq's next segment would have (inside the
// entries of the segment before it), is no segment of the log: walq names
// each segment after the last entry of the one before. Every open refuses
// it, changing nothing, and says so: not that segments are missing before
// it (none can be), but that it is not walq's and is to be moved out
// (ErrForeign, as for the other files walq never writes).
func TestJunkNamedInsideSegment(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, &wal.Options{SegmentSize: 4096})
	appendN(t, l, 1, 2)
	appendN(t, l, 3, 2) // a second entry: index 2 lies inside the segment
	closeLog(t, l)
	junk := filepath.Join(dir, "00000000000000000002")
	body := []byte("not a segment of this log")
	if err := os.WriteFile(junk, body, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, o := range []wal.Options{{}, {ReadOnly: true}, {Salvage: true}, {ReadOnly: true, Salvage: true}} {
		_, err := wal.Open(dir, &o)
		if !errors.Is(err, wal.ErrCorrupt) || !errors.Is(err, wal.ErrForeign) {
			t.Errorf("Open(ReadOnly %v, Salvage %v): %v; want ErrCorrupt and ErrForeign", o.ReadOnly, o.Salvage, err)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "missing") || !strings.Contains(msg, "move it out of the log directory") ||
			!strings.Contains(msg, "00000000000000000001") {
			t.Errorf("Open(ReadOnly %v, Salvage %v): %q; want it to name the segment it lies inside, "+
				"say the file is not the log's and to move it out, and not speak of missing segments", o.ReadOnly, o.Salvage, msg)
		}
	}
	if got, err := os.ReadFile(junk); err != nil || !bytes.Equal(got, body) {
		t.Errorf("the file was changed: %q, %v", got, err)
	}
}
