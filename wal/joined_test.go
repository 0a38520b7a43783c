package wal_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/walq/walq/wal"
)

// TestAppendJoined checks that a record appended in parts is their
// concatenation, in order, among records appended whole, through a
// reopen; that an empty part or none adds nothing; and that the record's
// whole size is held to MaxRecordSize.
func TestAppendJoined(t *testing.T) {
	dir := t.TempDir()
	opts := &wal.Options{Sync: wal.SyncNever, MaxRecordSize: 2000}
	l := openLog(t, dir, opts)
	big := bytes.Repeat([]byte("p"), 1500)
	cases := [][][]byte{
		{[]byte("head"), big, []byte("tail")},
		{[]byte("head"), {}, []byte("tail")},
		{nil, big, nil},
		{},
	}
	var want [][]byte
	for i, parts := range cases {
		_, c, err := l.AppendJoined(parts, i%2 == 1, i%3 == 0)
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			t.Fatalf("AppendJoined(case %d): %v", i, err)
		}
		want = append(want, bytes.Join(parts, nil))
		rec := record(i)
		if _, c, err = l.Append(rec); err == nil {
			err = c.Wait()
		}
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, rec)
	}
	if _, _, err := l.AppendJoined([][]byte{big, big}, false, true); !errors.Is(err, wal.ErrTooLarge) {
		t.Fatalf("AppendJoined of 3000 bytes = %v, want ErrTooLarge", err)
	}
	closeLog(t, l)
	l = openLog(t, dir, opts)
	defer closeLog(t, l)
	for i, w := range want {
		got, err := l.Read(wal.LSN(i + 1))
		if err != nil || !bytes.Equal(got, w) {
			t.Fatalf("Read(%d) = %d bytes %q..., %v; want %d bytes", i+1, len(got), got[:min(len(got), 8)], err, len(w))
		}
	}
	if last := l.LastLSN(); last != wal.LSN(len(want)) {
		t.Fatalf("LastLSN %d, want %d", last, len(want))
	}
}
