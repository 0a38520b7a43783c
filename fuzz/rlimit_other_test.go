//go:build !freebsd

package fuzz_test

import "syscall"

// fileLimit is the RLIMIT_FSIZE of setFileLimit: rlim_t is unsigned,
// RLIM_INFINITY (noLimit) its largest value.
func fileLimit(n uint64) *syscall.Rlimit {
	return &syscall.Rlimit{Cur: n, Max: noLimit}
}
