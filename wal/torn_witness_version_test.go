package wal

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// TestTornWitnessVersionBefore: a frame the end of the file cuts before
// its version byte, with a witness's length, is a witness only when a
// writer of version-2 entries wrote it, which the entry before it tells.
// After a version-1 entry it is an entry of records (a version-1 entry of
// one 7-byte record has a witness's length), and its LSNs are lost.
func TestTornWitnessVersionBefore(t *testing.T) {
	frame := func(e []byte) []byte { return append(binary.AppendUvarint(nil, uint64(len(e))), e...) }
	rec := []byte("seven b")
	for _, tc := range []struct {
		name     string
		before   []byte // the whole entry before the torn frame, records 1
		torn     []byte // the frame the end of the file cuts before its version byte
		lostNone bool
	}{
		{"after a version-1 entry", encodeEntryV1(1, [][]byte{rec}), encodeEntryV1(2, [][]byte{rec}), false},
		{"after a version-2 entry", encodeEntry(1, 0, [][]byte{rec}), encodeEntry(2, 1, nil), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.torn) != headerSize2 {
				t.Fatalf("the torn entry is %d bytes, want a witness's %d", len(tc.torn), headerSize2)
			}
			dir := t.TempDir()
			b := append(frame(tc.before), frame(tc.torn)[:1+offVersion]...)
			if err := os.WriteFile(filepath.Join(dir, segmentName(1)), b, 0o600); err != nil {
				t.Fatal(err)
			}
			l, err := Open(dir, &Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			torn := l.Report().Torn
			if torn == nil {
				t.Fatal("no torn tail reported")
			}
			if lostNone := torn.FirstLSN == 2 && torn.LastLSN == 1; lostNone != tc.lostNone {
				t.Fatalf("Torn = %v (LSNs %d-%d); lost no LSN: %v, want %v", torn, torn.FirstLSN, torn.LastLSN, lostNone, tc.lostNone)
			}
		})
	}
}
