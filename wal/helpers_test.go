package wal_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/walq/walq/wal"
)

// raceScaled returns n, or n/div under the race detector (at least 1): a
// test's count of crash states or rounds, cut where the detector makes
// each several times slower. The cut keeps every crash point, sync mode
// and case, and so every interleaving of the log's goroutines the test
// drives; only the random states checked at each are fewer.
func raceScaled(n, div int) int {
	if raceEnabled {
		return max(1, n/div)
	}
	return n
}

// openLog opens a log in dir and fails the test on error.
func openLog(t testing.TB, dir string, opts *wal.Options) *wal.Log {
	t.Helper()
	l, err := wal.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return l
}

// closeLog closes l and fails the test on error.
func closeLog(t testing.TB, l *wal.Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// record returns the deterministic payload of record i (sizes vary).
func record(i int) []byte {
	return []byte(fmt.Sprintf("record-%06d-%s", i, strings.Repeat(string(rune('a'+i%26)), i%97)))
}

// appendN appends records first..first+n-1, waits for all, and returns the
// LSNs assigned.
func appendN(t testing.TB, l *wal.Log, first, n int) []wal.LSN {
	t.Helper()
	lsns := make([]wal.LSN, 0, n)
	var last *wal.Commit
	for i := first; i < first+n; i++ {
		lsn, c, err := l.Append(record(i))
		if err != nil {
			t.Fatalf("Append(%d): %v", i, err)
		}
		lsns = append(lsns, lsn)
		last = c
	}
	if last != nil {
		if err := last.Wait(); err != nil {
			t.Fatalf("Wait: %v", err)
		}
	}
	return lsns
}

// readAll reads every record from lsn from on with a Reader until io.EOF.
func readAll(t testing.TB, l *wal.Log, from wal.LSN) (lsns []wal.LSN, recs [][]byte) {
	t.Helper()
	r := l.NewReader(from)
	defer r.Close()
	for {
		lsn, rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return lsns, recs
		}
		if err != nil {
			t.Fatalf("Next after %d records: %v", len(lsns), err)
		}
		lsns = append(lsns, lsn)
		recs = append(recs, append([]byte(nil), rec...))
	}
}

// checkRecords checks that the log holds record(firstRec+i) at firstLSN+i
// for i < n, through a Reader and through Read.
func checkRecords(t testing.TB, l *wal.Log, firstLSN wal.LSN, firstRec, n int) {
	t.Helper()
	lsns, recs := readAll(t, l, firstLSN)
	if len(lsns) != n {
		t.Fatalf("reader returned %d records from LSN %d, want %d", len(lsns), firstLSN, n)
	}
	for i := range lsns {
		if lsns[i] != firstLSN+wal.LSN(i) || string(recs[i]) != string(record(firstRec+i)) {
			t.Fatalf("reader record %d: LSN %d %q, want LSN %d %q", i, lsns[i], recs[i], firstLSN+wal.LSN(i), record(firstRec+i))
		}
		got, err := l.Read(lsns[i])
		if err != nil || string(got) != string(record(firstRec+i)) {
			t.Fatalf("Read(%d) = %q, %v; want %q", lsns[i], got, err, record(firstRec+i))
		}
	}
}

// fillSegments appends records to l until it has n segments or more and
// its last (the tail) holds a record, and returns its segments.
func fillSegments(t testing.TB, l *wal.Log, n int) []wal.SegmentInfo {
	t.Helper()
	for i := 0; ; i++ {
		appendN(t, l, i, 1)
		if segs := l.Segments(); len(segs) >= n && segs[len(segs)-1].FirstLSN != 0 {
			return segs
		}
	}
}

// truncationGate is a test file system that can hold one call of a
// truncation: once armed, the next call it gates waits, and the channel
// reachedCh returns is closed when that call arrives.
type truncationGate interface {
	arm()
	reachedCh() <-chan struct{}
}

// truncateHeld arms g, starts l.TruncateFront(cut) in a goroutine and
// returns once the truncation is held at g's gate (failing the test after
// 10 s), with the channel that receives TruncateFront's result; what
// names the gated call in that failure.
func truncateHeld(t *testing.T, l *wal.Log, g truncationGate, cut wal.LSN, what string) <-chan error {
	t.Helper()
	g.arm()
	res := make(chan error, 1)
	go func() { res <- l.TruncateFront(cut) }()
	within(t, g.reachedCh(), 10*time.Second, "truncation reaching "+what)
	return res
}
