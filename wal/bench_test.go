package wal_test

import (
	"math/rand/v2"
	"os"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/walq/walq/wal"
)

// BenchmarkAppend measures Append+Wait of 128-byte records: one goroutine
// and 64 goroutines under SyncAlways (group commit), and SyncNever.
func BenchmarkAppend(b *testing.B) {
	for _, bc := range []struct {
		name       string
		sync       wal.SyncMode
		goroutines int
	}{
		{"SyncAlways/goroutines=1", wal.SyncAlways, 1},
		{"SyncAlways/goroutines=64", wal.SyncAlways, 64},
		{"SyncNever/goroutines=1", wal.SyncNever, 1},
		{"SyncNever/goroutines=64", wal.SyncNever, 64},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := openLog(b, b.TempDir(), &wal.Options{Sync: bc.sync})
			rec := make([]byte, 128)
			b.SetBytes(int64(len(rec)))
			b.SetParallelism(max(1, bc.goroutines/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			if bc.goroutines == 1 {
				for range b.N {
					appendWait(b, l, rec)
				}
			} else {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						appendWait(b, l, rec)
					}
				})
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			closeLog(b, l)
		})
	}
}

func appendWait(b *testing.B, l *wal.Log, rec []byte) {
	_, c, err := l.Append(rec)
	if err == nil {
		err = c.Wait()
	}
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRead measures Read of consecutive LSNs (the entry cache path)
// and a Reader scan, over 128-byte records in groups of about 64.
func BenchmarkRead(b *testing.B) {
	l := openLog(b, b.TempDir(), &wal.Options{Sync: wal.SyncNever, MaxGroupBytes: 64 * 130})
	defer closeLog(b, l)
	const n = 100000
	rec := make([]byte, 128)
	for range n {
		if _, _, err := l.Append(rec); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		b.Fatal(err)
	}
	b.Run("Read/consecutive", func(b *testing.B) {
		for i := range b.N {
			if _, err := l.Read(wal.LSN(i%n + 1)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("Reader", func(b *testing.B) {
		r := l.NewReader(1)
		defer r.Close()
		for range b.N {
			if _, _, err := r.Next(); err != nil {
				r.Close()
				r = l.NewReader(1)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
}

// BenchmarkOpen measures Open and Close of a log of 128 sealed segments of
// 256 KiB (1 KiB records, one per entry): the checks Open runs on sealed
// segments (first headers, and the end of each) without reading them all.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	l := openLog(b, dir, &wal.Options{Sync: wal.SyncNever, SegmentSize: 256 << 10})
	rec := make([]byte, 1024)
	for len(l.Segments()) < 129 {
		for range 256 {
			appendWait(b, l, rec)
		}
	}
	closeLog(b, l)
	b.ResetTimer()
	for range b.N {
		closeLog(b, openLog(b, dir, nil))
	}
}

// BenchmarkOpenManySegments measures Open and Close of a log of 500
// sealed segments of 4 KiB (100-byte records, one per entry): a writable
// Open fsyncs every sealed segment, whose pages are clean here, as after a
// Close or a roll's fsync.
func BenchmarkOpenManySegments(b *testing.B) {
	dir := b.TempDir()
	l := openLog(b, dir, &wal.Options{Sync: wal.SyncNever, SegmentSize: 4 << 10})
	rec := make([]byte, 100)
	for len(l.Segments()) < 501 {
		appendWait(b, l, rec)
	}
	closeLog(b, l)
	b.ResetTimer()
	for range b.N {
		closeLog(b, openLog(b, dir, nil))
	}
}

// BenchmarkWaiting measures the path a queue takes for each record: each
// goroutine appends with AppendWaiting and waits for the commit itself
// (Wait, or WaitWritten for a lazy record), so that the callers write the
// groups; 100-byte records. It reports the process's CPU time per record
// beside the wall time, and records per write (tidwall/wal's WriteBatch:
// one write(2) unless it rolls); run with -benchmem for allocs/op.
func BenchmarkWaiting(b *testing.B) {
	for _, bc := range []struct {
		name       string
		sync       wal.SyncMode
		lazy       bool
		goroutines int
	}{
		{"SyncNever/Wait", wal.SyncNever, false, 1},
		{"SyncNever/WaitWritten", wal.SyncNever, true, 1},
		{"SyncNever/Wait/goroutines=8", wal.SyncNever, false, 8},
		{"SyncAlways/Wait", wal.SyncAlways, false, 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			fs := &countingFS{}
			l := openLog(b, b.TempDir(), &wal.Options{Sync: bc.sync, FS: fs})
			rec := make([]byte, 100)
			b.ReportAllocs()
			b.SetParallelism(max(1, bc.goroutines/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			cpu, writes := processCPU(), fs.batches.Load()
			if bc.goroutines == 1 {
				for range b.N {
					appendWaiting(b, l, rec, bc.lazy)
				}
			} else {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						appendWaiting(b, l, rec, bc.lazy)
					}
				})
			}
			reportCPU(b, cpu)
			b.ReportMetric(float64(b.N)/float64(max(1, fs.batches.Load()-writes)), "records/write")
			b.StopTimer()
			closeLog(b, l)
		})
	}
}

func appendWaiting(b *testing.B, l *wal.Log, rec []byte, lazy bool) {
	_, c, err := l.AppendWaiting(rec, lazy)
	if err == nil && lazy {
		err = c.WaitWritten()
	} else if err == nil {
		err = c.Wait()
	}
	if err != nil {
		b.Fatal(err)
	}
}

// countingFS is the real file system, counting tidwall/wal's batches.
type countingFS struct {
	wal.OSFS
	batches atomic.Int64
}

func (f *countingFS) StoreOp(op string) error {
	if op == wal.StoreWriteBatch {
		f.batches.Add(1)
	}
	return nil
}

// BenchmarkSalvageTornRoll measures a salvaging Open (and Close) of a log
// whose roll a crash tore inside a 48 MiB entry of random bytes: the
// repair searches every offset of the torn entry for a valid one.
func BenchmarkSalvageTornRoll(b *testing.B) {
	src := b.TempDir()
	l := openLog(b, src, &wal.Options{Sync: wal.SyncNever, SegmentSize: 1 << 20})
	appendWait(b, l, []byte("before the torn entry"))
	big := make([]byte, 48<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	appendWait(b, l, big)
	segs := l.Segments()
	closeLog(b, l)
	if len(segs) != 2 || segs[1].Bytes != 0 {
		b.Fatalf("segments %+v, want one sealed and an empty tail", segs)
	}
	if err := os.Truncate(segs[0].Path, segs[0].Bytes-1024); err != nil {
		b.Fatal(err)
	}
	opts := &wal.Options{Sync: wal.SyncNever, SegmentSize: 1 << 20, Salvage: true}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		dir := b.TempDir()
		copyDir(b, src, dir)
		b.StartTimer()
		l := openLog(b, dir, opts)
		if i == 0 && l.Report().Torn == nil && len(l.Report().Salvaged) == 0 {
			b.Fatalf("Report %+v: the torn entry is not reported", l.Report())
		}
		closeLog(b, l)
	}
}
