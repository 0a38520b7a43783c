//go:build !unix

package wal_test

import "testing"

// processCPU cannot read the process's CPU time here.
func processCPU() int64 { return -1 }

// reportCPU reports nothing where the process's CPU time cannot be read.
func reportCPU(*testing.B, int64) {}
