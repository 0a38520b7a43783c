package wal

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkGather runs the per-message durable cycle of four producers
// and four consumers on the log alone: a producer appends and waits for
// the fsync; a consumer appends a lease and waits for its write, then an
// ack and waits for the fsync. It reports messages per second and fsyncs
// per message (the floor is 0.25: four producers' and four consumers'
// records in each fsync). The fsync is the disk's, or simulated by a
// nanosleep, which blocks the thread as an fsync does, so that the
// gathering can be compared without the disk's noise.
func BenchmarkGather(b *testing.B) {
	for _, d := range []time.Duration{0, 100 * time.Microsecond, 400 * time.Microsecond} {
		name := "fsync=disk"
		if d > 0 {
			name = fmt.Sprintf("fsync=%v", d)
		}
		b.Run(name, func(b *testing.B) {
			var fsyncs atomic.Int64
			f := faults{datasync: func(f File) error {
				fsyncs.Add(1)
				if d == 0 {
					return f.Datasync()
				}
				ts := syscall.NsecToTimespec(int64(d))
				return syscall.Nanosleep(&ts, nil)
			}}
			l, err := open(b.TempDir(), nil, f)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			b.ResetTimer()
			cycle(b, l)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(fsyncs.Load())/float64(b.N), "fsyncs/msg")
		})
	}
}

// cycle runs b.N messages through four producers and four consumers.
func cycle(b *testing.B, l *Log) {
	rec := make([]byte, 150)
	step := func(rec []byte, lazy bool) bool {
		_, c, err := l.AppendWaiting(rec, lazy)
		if err == nil && lazy {
			err = c.WaitWritten()
		} else if err == nil {
			err = c.Wait()
		}
		if err != nil {
			b.Error(err)
		}
		return err == nil
	}
	var produced, consumed atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for produced.Add(1) <= int64(b.N) && step(rec, false) {
			}
		}()
		go func() {
			defer wg.Done()
			for consumed.Add(1) <= int64(b.N) && step(rec[:40], true) && step(rec[:40], false) {
			}
		}()
	}
	wg.Wait()
}
