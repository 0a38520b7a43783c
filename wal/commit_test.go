package wal_test

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walq/walq/wal"
)

// TestGroupCommit: 64 goroutines append concurrently under SyncAlways.
// LSNs are unique and contiguous, Wait returns only once DurableLSN covers
// the record, and every record reads back intact.
func TestGroupCommit(t *testing.T) {
	const writers, perWriter = 64, 100
	dir := t.TempDir()
	opts := &wal.Options{SegmentSize: 64 << 10}
	l := openLog(t, dir, opts)
	got := make([][]wal.LSN, writers)
	var wg sync.WaitGroup
	for w := range writers {
		spawn(&wg, func() {
			for i := range perWriter {
				lsn, c, err := l.Append(selfChecking(uint64(w*perWriter + i)))
				if err != nil {
					t.Error(err)
					return
				}
				if err := c.Wait(); err != nil {
					t.Error(err)
					return
				}
				if d := l.DurableLSN(); d < lsn {
					t.Errorf("Wait returned for LSN %d with DurableLSN %d", lsn, d)
				}
				got[w] = append(got[w], lsn)
			}
		})
	}
	wg.Wait()
	all := slices.Concat(got...)
	slices.Sort(all)
	for i, lsn := range all {
		if lsn != wal.LSN(i+1) {
			t.Fatalf("LSNs not contiguous at %d: %d", i, lsn)
		}
	}
	for w := range got {
		if !slices.IsSorted(got[w]) {
			t.Fatalf("writer %d saw LSNs out of order", w)
		}
	}
	closeLog(t, l)
	l = openLog(t, dir, opts)
	defer closeLog(t, l)
	r := l.NewReader(1)
	defer r.Close()
	n := 0
	for {
		_, rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || !validSelfChecking(rec) {
			t.Fatalf("record %d: %v (valid %v)", n, err, validSelfChecking(rec))
		}
		n++
	}
	if n != writers*perWriter {
		t.Fatalf("read %d records, want %d", n, writers*perWriter)
	}
}

// selfChecking returns a record that carries its own checksum.
func selfChecking(seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	b := make([]byte, 8+rng.IntN(200))
	binary.LittleEndian.PutUint64(b, seed)
	for i := 12; i < len(b); i++ {
		b[i] = byte(rng.Uint32())
	}
	if len(b) >= 12 {
		binary.LittleEndian.PutUint32(b[8:], crc32.ChecksumIEEE(b[12:]))
	}
	return b
}

func validSelfChecking(b []byte) bool {
	if len(b) < 8 {
		return false
	}
	return string(b) == string(selfChecking(binary.LittleEndian.Uint64(b)))
}

// TestSyncModes checks when Wait returns and when DurableLSN advances.
func TestSyncModes(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts wal.Options
	}{
		{"SyncInterval", wal.Options{Sync: wal.SyncInterval, SyncInterval: 20 * time.Millisecond}},
		{"SyncNever", wal.Options{Sync: wal.SyncNever}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := openLog(t, t.TempDir(), &tc.opts)
			defer closeLog(t, l)
			appendN(t, l, 0, 1) // may be fsynced at once: the first interval has passed
			lsn := appendN(t, l, 1, 1)[0]
			if l.WrittenLSN() < lsn {
				t.Fatalf("WrittenLSN %d after Wait of %d", l.WrittenLSN(), lsn)
			}
			if tc.opts.Sync == wal.SyncInterval {
				deadline := time.Now().Add(5 * time.Second)
				for l.DurableLSN() < lsn && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				if l.DurableLSN() < lsn {
					t.Fatalf("DurableLSN %d did not reach %d after the interval", l.DurableLSN(), lsn)
				}
				return
			}
			if l.DurableLSN() >= lsn {
				t.Fatalf("SyncNever: DurableLSN %d already covers %d", l.DurableLSN(), lsn)
			}
			if err := l.Flush(); err != nil || l.DurableLSN() < lsn {
				t.Fatalf("Flush = %v, DurableLSN %d, want >= %d", err, l.DurableLSN(), lsn)
			}
		})
	}
}

// TestFlushCoversOpenGroup checks that Flush waits for records whose
// Commits nobody waits on.
func TestFlushCoversOpenGroup(t *testing.T) {
	l := openLog(t, t.TempDir(), &wal.Options{Sync: wal.SyncNever})
	defer closeLog(t, l)
	var last wal.LSN
	for i := range 1000 {
		lsn, _, err := l.Append(record(i))
		if err != nil {
			t.Fatal(err)
		}
		last = lsn
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if l.WrittenLSN() != last || l.DurableLSN() != last {
		t.Fatalf("after Flush Written/Durable %d/%d, want %d", l.WrittenLSN(), l.DurableLSN(), last)
	}
}

// TestLargeRecords checks records larger than MaxGroupBytes and than the
// read-ahead buffer.
func TestLargeRecords(t *testing.T) {
	dir := t.TempDir()
	opts := &wal.Options{SegmentSize: 256 << 10, MaxGroupBytes: 64 << 10}
	l := openLog(t, dir, opts)
	sizes := []int{0, 1, 70 << 10, 300 << 10, 5, 1 << 20}
	for i, n := range sizes {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(i + j)
		}
		if _, c, err := l.Append(b); err != nil || c.Wait() != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
	l = openLog(t, dir, opts)
	defer closeLog(t, l)
	_, recs := readAll(t, l, 1)
	for i, n := range sizes {
		if len(recs[i]) != n || (n > 0 && recs[i][n-1] != byte(i+n-1)) {
			t.Fatalf("record %d: %d bytes, want %d", i, len(recs[i]), n)
		}
		if got, err := l.Read(wal.LSN(i + 1)); err != nil || len(got) != n {
			t.Fatalf("Read(%d): %d bytes, %v", i+1, len(got), err)
		}
	}
}

// TestConcurrentReadersWritersTruncation runs writers, Readers, random
// Reads and TruncateFront together (run it under -race).
func TestConcurrentReadersWritersTruncation(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	l := openLog(t, t.TempDir(), &wal.Options{SegmentSize: 8 << 10, MaxGroupBytes: 1 << 10})
	defer closeLog(t, l)
	var stop atomic.Bool
	var writers, others sync.WaitGroup
	for w := range 4 {
		spawn(&writers, func() {
			for i := 0; i < 1500; i++ {
				_, c, err := l.Append(selfChecking(uint64(w)<<32 | uint64(i)))
				if err != nil {
					t.Error(err)
					return
				}
				if i%50 == 0 {
					if err := c.Wait(); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	for range 3 {
		spawn(&others, func() { followLog(t, l, &stop) })
	}
	spawn(&others, func() { randomReads(t, l, &stop, seed) })
	spawn(&others, func() {
		for !stop.Load() {
			if w := l.WrittenLSN(); w > 2000 {
				if err := l.TruncateFront(w - 2000); err != nil {
					t.Error(err)
					return
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	writers.Wait()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	stop.Store(true)
	others.Wait()
	if _, err := l.Verify(); err != nil {
		t.Fatal(err)
	}
}

// followLog tails the log with a Reader, restarting at FirstLSN when its
// position is truncated away; LSNs must ascend by one and records be intact.
func followLog(t *testing.T, l *wal.Log, stop *atomic.Bool) {
	r := l.NewReader(l.FirstLSN())
	defer func() { r.Close() }()
	var prev wal.LSN
	for {
		lsn, rec, err := r.Next()
		switch {
		case errors.Is(err, io.EOF):
			if stop.Load() {
				return
			}
			time.Sleep(time.Millisecond)
			continue
		case errors.Is(err, wal.ErrNotFound):
			r.Close()
			r, prev = l.NewReader(l.FirstLSN()), 0
			continue
		case err != nil:
			t.Error(err)
			return
		}
		if (prev != 0 && lsn != prev+1) || !validSelfChecking(rec) {
			t.Errorf("reader: LSN %d after %d, valid %v", lsn, prev, validSelfChecking(rec))
			return
		}
		prev = lsn
	}
}

// randomReads reads random LSNs in [FirstLSN, WrittenLSN].
func randomReads(t *testing.T, l *wal.Log, stop *atomic.Bool, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	for !stop.Load() {
		first, written := l.FirstLSN(), l.WrittenLSN()
		if written < first {
			continue
		}
		lsn := first + rng.Uint64N(written-first+1)
		rec, err := l.Read(lsn)
		if errors.Is(err, wal.ErrNotFound) && lsn < l.FirstLSN() {
			continue // truncated meanwhile
		}
		if err != nil || !validSelfChecking(rec) {
			t.Errorf("Read(%d): %v", lsn, err)
			return
		}
	}
}

// TestWaitWritten: once WaitWritten returns, the record is readable (a
// crash of the process can no longer lose it), and Wait still reports the
// fsync under SyncAlways.
func TestWaitWritten(t *testing.T) {
	l := openLog(t, t.TempDir(), nil)
	t.Cleanup(func() { closeLog(t, l) })
	for i := range 50 {
		lsn, c, err := l.Append([]byte{byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WaitWritten(); err != nil {
			t.Fatal(err)
		}
		if w := l.WrittenLSN(); w < lsn {
			t.Fatalf("WaitWritten returned with WrittenLSN %d < %d", w, lsn)
		}
		rec, err := l.Read(lsn)
		if err != nil || len(rec) != 1 || rec[0] != byte(i) {
			t.Fatalf("Read(%d) after WaitWritten = %v, %v", lsn, rec, err)
		}
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
		if d := l.DurableLSN(); d < lsn {
			t.Fatalf("Wait returned with DurableLSN %d < %d", d, lsn)
		}
	}
}

// TestAppendLazy: a lazy record is written without an fsync of its own and
// becomes durable with the next Append's.
func TestAppendLazy(t *testing.T) {
	l := openLog(t, t.TempDir(), nil)
	t.Cleanup(func() { closeLog(t, l) })
	lazy, c, err := l.AppendLazy([]byte("lease"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if w := l.WrittenLSN(); w < lazy {
		t.Fatalf("lazy record not written: WrittenLSN %d < %d", w, lazy)
	}
	lsn, c, err := l.Append([]byte("ack"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if d := l.DurableLSN(); d < lsn || d < lazy {
		t.Fatalf("DurableLSN %d does not cover %d and %d", d, lazy, lsn)
	}
}
