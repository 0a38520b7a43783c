package queue

import (
	"errors"
	"fmt"
	"os"

	"github.com/walq/walq/internal/dirlock"
)

// dirLock is a held lock on a queue directory.
type dirLock = dirlock.Lock

// lockDir takes the directory's lock without waiting: exclusive for a
// queue, shared for a reader that must not run beside a writer. It is the
// directory's only lock: the log below it takes none of its own.
func lockDir(dir string, mode os.FileMode, exclusive bool) (*dirlock.Lock, error) {
	l, err := dirlock.Acquire(dir, mode, exclusive)
	if errors.Is(err, dirlock.ErrLocked) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("queue: lock %s: %w", dir, err)
	}
	return l, nil
}

// lockShared takes the directory's lock shared without creating the lock
// file; nil when there is none (no queue has ever opened dir for writing).
func lockShared(dir string) (*dirlock.Lock, error) {
	l, err := dirlock.AcquireShared(dir)
	if errors.Is(err, dirlock.ErrLocked) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("queue: lock %s: %w", dir, err)
	}
	return l, nil
}

// unlockDir releases the lock taken by lockDir.
func unlockDir(l *dirlock.Lock) error {
	if err := l.Release(); err != nil {
		return fmt.Errorf("queue: unlock: %w", err)
	}
	return nil
}
