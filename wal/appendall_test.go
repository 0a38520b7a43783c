package wal_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/walq/walq/wal"
)

// TestAppendAllKeepsAllOrNone cuts the log at every byte of an AppendAll
// batch larger than MaxGroupBytes, written after a record of its own, and
// checks that every reopened log holds the first record and either the
// whole batch or none of it: a crash never keeps a part.
func TestAppendAllKeepsAllOrNone(t *testing.T) {
	dir := t.TempDir()
	opts := &wal.Options{SegmentSize: 1 << 20, MaxGroupBytes: 256}
	l := openLog(t, dir, opts)
	_, c, err := l.Append([]byte("alone"))
	if err == nil {
		err = c.Wait()
	}
	if err != nil {
		t.Fatal(err)
	}
	seg := l.Segments()[0].Path
	before, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	var batch [][]byte
	for i := range 20 {
		batch = append(batch, []byte(fmt.Sprintf("batch record %02d, padded to pass the group limit", i)))
	}
	first, c, err := l.AppendAll(batch, true)
	if err == nil {
		err = c.Wait()
	}
	if err != nil {
		t.Fatal(err)
	}
	if first != 2 {
		t.Fatalf("first LSN %d, want 2", first)
	}
	closeLog(t, l)
	after, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	want := append([][]byte{[]byte("alone")}, batch...)
	for cut := len(before); cut <= len(after); cut++ {
		got := reopenCut(t, seg, after[:cut], opts)
		switch {
		case len(got) == 1 && bytes.Equal(got[0], want[0]) && cut < len(after):
		case len(got) == len(want) && cut == len(after):
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("whole log: record %d is %q, want %q", i+1, got[i], want[i])
				}
			}
		default:
			t.Fatalf("cut at byte %d of %d: %d records, want 1 (batch lost whole) or %d (whole log)", cut, len(after), len(got), len(want))
		}
	}
}

// reopenCut writes body as the only segment of a fresh log directory,
// opens it (a torn tail is cut) and returns its records.
func reopenCut(t *testing.T, seg string, body []byte, opts *wal.Options) [][]byte {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(seg)), body, 0o600); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, dir, opts)
	defer closeLog(t, l)
	r := l.NewReader(l.FirstLSN())
	defer r.Close()
	var out [][]byte
	for {
		_, rec, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bytes.Clone(rec))
	}
}
