//go:build unix

package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockName is the file a writable Log holds an exclusive flock on, so that
// two processes (or two Logs in one process) never write the same
// directory. tidwall/wal ignores it (its name is not a segment name).
const lockName = "LOCK"

// lockDir takes the directory's lock; the returned file holds it until
// closed. A read-only Log takes no lock and creates nothing.
func lockDir(dir string, mode os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR, mode)
	if err != nil {
		return nil, fmt.Errorf("wal: lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("wal: %s is in use by another writable Log", dir)
		}
		return nil, fmt.Errorf("wal: lock %s: %w", dir, err)
	}
	return f, nil
}
