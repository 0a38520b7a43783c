package fuzz_test

import (
	"math"
	"syscall"
)

// fileLimit is the RLIMIT_FSIZE of setFileLimit: FreeBSD's rlim_t is
// signed, and its RLIM_INFINITY is the largest int64.
func fileLimit(n uint64) *syscall.Rlimit {
	cur := int64(math.MaxInt64)
	if n < math.MaxInt64 {
		cur = int64(n)
	}
	return &syscall.Rlimit{Cur: cur, Max: math.MaxInt64}
}
