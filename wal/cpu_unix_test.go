//go:build unix

package wal_test

import (
	"syscall"
	"testing"
)

// processCPU returns the process's user+system CPU time in nanoseconds, or
// -1 when it cannot be read.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// reportCPU reports the process's CPU time per operation since start, a
// processCPU reading, when both readings were made.
func reportCPU(b *testing.B, start int64) {
	if now := processCPU(); start >= 0 && now >= 0 {
		b.ReportMetric(float64(now-start)/float64(b.N), "cpu-ns/op")
	}
}
