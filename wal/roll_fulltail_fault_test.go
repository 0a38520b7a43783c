package wal_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/wal"
)

// TestFaultDuringFullTailRoll: an Open that rolls a tail of exactly
// SegmentSize (after cutting zeros, or a torn entry and its roll's empty
// tail, after it) can fail at any operation of its repair and of the
// roll: the fsync of the full tail, the create of the next segment, the
// directory fsync. At every counted operation of that Open (and its
// Close), a failure must come back from Open as an error wrapping the
// injected one (not be swallowed, leaving a segment whose name may not be
// durable as the tail), and the next Open, on a sound disk, must open the
// log with every record, take an append and read it back after a reopen.
func TestFaultDuringFullTailRoll(t *testing.T) {
	const records = 6
	entries := probeEntries(t, records+1)
	size := int64(len(probeEntries(t, records)))
	torn := entries[size : size+(int64(len(entries))-size)/2]
	for _, c := range []struct {
		name  string
		after []byte // bytes after the full segment's last entry
		tail  int    // the empty tail after it, by index; 0 for none
	}{
		{"roll's name lost", nil, 0},
		{"zeros after the full segment's end", make([]byte, 100), 0},
		{"entry torn after the full segment's end, under its roll's empty tail", torn, records + 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			faultsOverFullTail(t, size, records, func(dir string) error {
				return damageFullTail(dir, c.after, c.tail)
			})
		})
	}
}

// faultsOverFullTail builds the full tail (fullTailLog, then damage) and
// fails each counted operation of an Open and Close of it in turn.
func faultsOverFullTail(t *testing.T, size int64, records int, damage func(dir string) error) {
	opts := wal.Options{SegmentSize: size, Sync: wal.SyncAlways, MaxGroupBytes: 1, Locked: true}
	for failAt := 1; ; failAt++ {
		dir := filepath.Join(t.TempDir(), "log")
		fullTailLog(t, dir, &opts, records)
		if err := damage(dir); err != nil {
			t.Fatal(err)
		}
		ffs := faultfs.New(failAt)
		o := opts
		o.FS = ffs
		l, err := wal.Open(dir, &o)
		op, hit := ffs.Hit()
		where := fmt.Sprintf("operation %d (%s %s) failed", failAt, op.Kind, filepath.Base(op.Path))
		switch {
		case hit && err == nil:
			l.Close()
			t.Fatalf("%s during Open, and Open returned nil", where)
		case err != nil && !errors.Is(err, faultfs.ErrInjected):
			t.Fatalf("%s: Open: %v, not the injected error", where, err)
		case err == nil:
			l.Close() // a failure here is the Close's to report
			if _, hit = ffs.Hit(); !hit {
				t.Logf("%d counted operations", failAt-1)
				return
			}
		}
		reopenFullTail(t, where, dir, opts, records)
	}
}

// reopenFullTail opens the log in dir on the real file system and checks
// that it holds records 0 to n-1, then that it takes record n, which a
// reopen reads back.
func reopenFullTail(t *testing.T, where, dir string, opts wal.Options, n int) {
	t.Helper()
	l, err := wal.Open(dir, &opts)
	if err != nil {
		t.Fatalf("%s: the next Open: %v", where, err)
	}
	_, got := readAll(t, l, 1)
	if len(got) != n {
		t.Fatalf("%s: the next Open reads %d records, want %d", where, len(got), n)
	}
	for i := range got {
		if !bytes.Equal(got[i], record(i)) {
			t.Fatalf("%s: record %d is not what was written", where, i)
		}
	}
	lsn := appendN(t, l, n, 1)[0]
	closeLog(t, l)
	l = openLog(t, dir, &opts)
	defer closeLog(t, l)
	if rec, err := l.Read(lsn); err != nil || !bytes.Equal(rec, record(n)) {
		t.Fatalf("%s: the record appended after the next Open, at LSN %d: %q, %v", where, lsn, rec, err)
	}
}
