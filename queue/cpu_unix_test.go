//go:build unix

package queue_test

import (
	"syscall"
	"testing"
)

// processCPU returns the CPU time the process has used, user and system,
// in nanoseconds, or -1 where it cannot be read: on a machine shared with
// other work it measures the cost of an operation where the wall clock
// measures the load as well.
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
