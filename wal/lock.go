package wal

import (
	"errors"
	"fmt"
	"os"

	"github.com/walq/walq/internal/dirlock"
)

// lockDir takes the directory's exclusive lock, so that two processes (or
// two Logs in one process) never write the same directory; the lock file
// (dirlock.Name) is not a segment name, so tidwall/wal ignores it. A
// read-only Log, and one whose caller holds a lock covering the directory
// (Options.Locked), take none.
func lockDir(dir string, mode os.FileMode) (*dirlock.Lock, error) {
	l, err := dirlock.Acquire(dir, mode, true)
	if errors.Is(err, dirlock.ErrLocked) {
		return nil, fmt.Errorf("wal: %s is in use by another writable Log: %w", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("wal: lock %s: %w", dir, err)
	}
	return l, nil
}
