package wal_test

import (
	"testing"

	"github.com/walq/walq/wal"
)

// TestTruncateFrontKeepsDurableRecord: under SyncNever a roll fsyncs the
// segment it seals, but the records then written to the new tail are not
// durable. TruncateFront at the tail's first LSN removes every segment
// before it durably (the directory is fsynced), so it must make the kept
// tail's records durable first: else a power loss would take them and
// leave a log with no record at all, not even those that were durable
// before (a queue's snapshot needs the log to reach its last LSN, and
// refuses the log).
func TestTruncateFrontKeepsDurableRecord(t *testing.T) {
	l := openLog(t, t.TempDir(), &wal.Options{SegmentSize: 4 << 10, Sync: wal.SyncNever})
	defer closeLog(t, l)
	for i := 0; ; i++ {
		_, c, err := l.Append(record(i))
		if err == nil {
			err = c.WaitWritten()
		}
		if err != nil {
			t.Fatal(err)
		}
		if segs := l.Segments(); len(segs) >= 2 && segs[len(segs)-1].FirstLSN != 0 {
			break
		}
	}
	segs := l.Segments()
	tailFirst := segs[len(segs)-1].FirstLSN
	durable := l.DurableLSN()
	if durable == 0 || durable >= tailFirst {
		t.Fatalf("DurableLSN %d with the tail starting at LSN %d; the test needs the sealed records durable, the tail's not", durable, tailFirst)
	}
	if err := l.TruncateFront(tailFirst); err != nil {
		t.Fatal(err)
	}
	if first, durable := l.FirstLSN(), l.DurableLSN(); first > durable {
		t.Fatalf("TruncateFront(%d) keeps the log from LSN %d, but only LSNs to %d are durable: a power loss now leaves no record",
			tailFirst, first, durable)
	}
}
