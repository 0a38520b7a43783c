//go:build !unix

package queue_test

import "testing"

// processCPU has no portable source outside unix: -1, nothing measured.
func processCPU() int64 { return -1 }

// reportCPU reports nothing where the process's CPU time cannot be read.
func reportCPU(*testing.B, int64) {}
