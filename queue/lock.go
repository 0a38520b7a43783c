package queue

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/walq/walq/internal/dirlock"
)

// dirLock is a held lock on a queue directory.
type dirLock = dirlock.Lock

// lockPollMax is the longest pause between two tries of a lock that
// lockDir waits for; the pauses start at a millisecond and double.
const lockPollMax = 50 * time.Millisecond

// lockDir takes the directory's lock, exclusive for a queue, shared for a
// reader that must not run beside a writer, trying again until wait has
// passed while another holds it (0: one try). flock(2) has no timeout
// and a blocking lock could not be given up, so it polls. It is the
// directory's only lock: the log below it takes none of its own.
func lockDir(dir string, mode os.FileMode, exclusive bool, wait time.Duration) (*dirlock.Lock, error) {
	deadline := time.Now().Add(wait)
	for pause := time.Millisecond; ; pause = min(2*pause, lockPollMax) {
		l, err := dirlock.Acquire(dir, mode, exclusive)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, dirlock.ErrLocked) {
			return nil, fmt.Errorf("queue: lock %s: %w", dir, err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, lockedErr(dir, wait)
		}
		time.Sleep(min(pause, left))
	}
}

// lockedErr is lockDir's error when another still holds dir's lock after
// wait: ErrLocked, naming dir and how long the open waited, if at all.
func lockedErr(dir string, wait time.Duration) error {
	if wait > 0 {
		return fmt.Errorf("%w: %s (waited %v)", ErrLocked, dir, wait)
	}
	return fmt.Errorf("%w: %s", ErrLocked, dir)
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
