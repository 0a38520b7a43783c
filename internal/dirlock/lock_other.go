//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd || windows)

package dirlock

import "os"

// lockFile refuses: without a lock two processes could write one
// directory, so walq does not open it at all.
func lockFile(f *os.File, exclusive bool) error { return ErrUnsupported }

func unlockFile(f *os.File) error { return nil }
