package wal_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/walq/walq/wal"
)

// TestDamageAfterCloseRefused: Close fsyncs everything, whatever the sync
// mode, so every record of a closed log is durable. A byte of a record
// in the middle of the last segment that changes after that (a bit
// flip, a bad block) is damage to durable records, which valid entries
// follow: Open must refuse it (ErrCorrupt), never cut the records from
// there on as if a crash had torn them. Each record is written on its
// own, waited for, and never fsynced before Close, as SyncNever and
// SyncInterval leave them.
func TestDamageAfterCloseRefused(t *testing.T) {
	for _, mode := range []struct {
		name string
		sync wal.SyncMode
	}{{"always", wal.SyncAlways}, {"interval", wal.SyncInterval}, {"never", wal.SyncNever}} {
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, &wal.Options{Sync: mode.sync})
			for i := range 10 {
				appendN(t, l, i, 1)
			}
			closeLog(t, l)
			seg := filepath.Join(dir, "00000000000000000001")
			b, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x40
			if err := os.WriteFile(seg, b, 0o644); err != nil {
				t.Fatal(err)
			}
			l2, err := wal.Open(dir, nil)
			if err == nil {
				torn := l2.Report().Torn
				last := l2.WrittenLSN()
				closeLog(t, l2)
				t.Fatalf("Open cut a closed log's durable records: %v; the log now ends at LSN %d of 10", torn, last)
			}
			if !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("Open = %v, want ErrCorrupt", err)
			}
		})
	}
}
