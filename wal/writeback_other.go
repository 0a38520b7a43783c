//go:build !linux

package wal

// writebackHints reports whether the platform has write-back hints: not
// here, so the Log runs no write-back goroutine (writeback.go).
const writebackHints = false

// startWriteback makes no hint: the platform has none (supported false).
func startWriteback(File, int64, int64) (bool, error) { return false, nil }

// flushable reports whether the tail's File is flushed before its roll:
// never here, where no write-back goroutine runs.
func flushable(File) bool { return false }
