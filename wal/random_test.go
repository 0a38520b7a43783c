package wal_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/walq/walq/wal"
)

// payload is the record stored at lsn in TestRandomized: its size depends
// on size, its bytes on lsn.
func payload(lsn wal.LSN, size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(lsn) + byte(i*7)
	}
	return b
}

// TestRandomized runs random appends (of random sizes, some larger than a
// segment), flushes, truncations and reopens with changing segment sizes,
// and checks the whole log after each step against what was appended.
func TestRandomized(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	dir := t.TempDir()
	sizes := map[wal.LSN]int{}
	segSizes := []int64{512, 4 << 10, 64 << 10}
	open := func() *wal.Log {
		return openLog(t, dir, &wal.Options{SegmentSize: segSizes[rng.IntN(len(segSizes))],
			MaxGroupBytes: 1 + rng.IntN(8<<10), Sync: wal.SyncMode(rng.IntN(3)), StartLSN: 100})
	}
	l := open()
	defer func() { closeLog(t, l) }()
	for step := range 60 {
		switch op := rng.IntN(10); {
		case op < 6:
			var c *wal.Commit
			for range 1 + rng.IntN(50) {
				n := rng.IntN(300)
				if rng.IntN(20) == 0 {
					n = rng.IntN(10 << 10)
				}
				lsn, cc, err := l.Append(payload(l.LastLSN()+1, n))
				if err != nil || lsn != l.LastLSN() {
					t.Fatalf("step %d: Append = %d, %v", step, lsn, err)
				}
				sizes[lsn], c = n, cc
			}
			if rng.IntN(2) == 0 {
				if err := c.Wait(); err != nil {
					t.Fatal(err)
				}
			}
		case op < 7:
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		case op < 8:
			if err := l.TruncateFront(l.FirstLSN() + wal.LSN(rng.IntN(200))); err != nil {
				t.Fatal(err)
			}
		default:
			closeLog(t, l)
			l = open()
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		checkModel(t, l, sizes, rng)
	}
}

// checkModel reads the log with a Reader and with random Reads.
func checkModel(t *testing.T, l *wal.Log, sizes map[wal.LSN]int, rng *rand.Rand) {
	t.Helper()
	first, last := l.FirstLSN(), l.WrittenLSN()
	if last != wal.LSN(99+len(sizes)) {
		t.Fatalf("WrittenLSN %d, want %d", last, 99+len(sizes))
	}
	lsns, recs := readAll(t, l, first)
	for i, lsn := range lsns {
		if lsn != first+wal.LSN(i) || !bytes.Equal(recs[i], payload(lsn, sizes[lsn])) {
			t.Fatalf("reader: record %d has LSN %d (want %d), intact %v", i, lsn, first+wal.LSN(i),
				bytes.Equal(recs[i], payload(lsn, sizes[lsn])))
		}
	}
	if len(lsns) != int(last-first+1) {
		t.Fatalf("reader returned %d records, want %d", len(lsns), last-first+1)
	}
	for i := 0; i < 20 && last >= first; i++ {
		lsn := first + wal.LSN(rng.IntN(int(last-first+1)))
		if got, err := l.Read(lsn); err != nil || !bytes.Equal(got, payload(lsn, sizes[lsn])) {
			t.Fatalf("Read(%d): %v", lsn, err)
		}
	}
	if first > 100 {
		if _, err := l.Read(first - 1); !errors.Is(err, wal.ErrNotFound) {
			t.Fatalf("Read below FirstLSN: %v", err)
		}
	}
	if _, err := l.Verify(); err != nil {
		t.Fatal(err)
	}
}
