package wal_test

import (
	"errors"
	"os"
	"testing"

	"github.com/walq/walq/wal"
)

// TestForeignStartFile: a NAME.START file is what an older walq's
// truncation (tidwall/wal's TruncateFront) left: the kept segment's
// entries, which Open puts in place of the segments up to NAME. One that
// holds no valid entry is not that, and finishing it would remove every
// record of the segments it names: Open, writable, read-only or
// salvaging, must refuse it and change nothing.
func TestForeignStartFile(t *testing.T) {
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"junk", []byte("not a segment at all")},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, nil)
			lsns := appendN(t, l, 1, 10)
			closeLog(t, l)
			seg := segmentFiles(t, dir)[0]
			before, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			start := seg + ".START"
			if err := os.WriteFile(start, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, o := range []wal.Options{{}, {ReadOnly: true}, {Salvage: true}, {ReadOnly: true, Salvage: true}} {
				l, err := wal.Open(dir, &o)
				if err == nil {
					l.Close()
				}
				if !errors.Is(err, wal.ErrCorrupt) || !errors.Is(err, wal.ErrForeign) {
					t.Errorf("Open(%+v) with a START file that holds no entry: %v, want ErrCorrupt and ErrForeign", o, err)
				}
				after, rerr := os.ReadFile(seg)
				if rerr != nil || string(after) != string(before) {
					t.Fatalf("Open(%+v) changed %s (%d bytes left of %d): %v", o, seg, len(after), len(before), rerr)
				}
			}
			if err := os.Remove(start); err != nil {
				t.Fatal(err)
			}
			l = openLog(t, dir, nil)
			defer closeLog(t, l)
			for _, lsn := range lsns {
				if _, err := l.Read(lsn); err != nil {
					t.Errorf("Read(%d) once the START file is moved out: %v", lsn, err)
				}
			}
		})
	}
}
