//go:build !linux

package wal

import "os"

// datasync flushes f; where fdatasync is not available it is fsync.
func datasync(f *os.File) error { return f.Sync() }
