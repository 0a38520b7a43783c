package dirlock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Name is the lock file in a locked directory. It stays empty; only its
// lock matters.
const Name = "LOCK"

var (
	// ErrLocked is returned when another process (or another open in this
	// one) holds a lock that conflicts with the one asked for.
	ErrLocked = errors.New("dirlock: directory locked")
	// ErrUnsupported is returned on a system that has no file lock walq
	// knows how to take.
	ErrUnsupported = errors.New("dirlock: file locking not supported on this system")
)

// Lock is a held directory lock.
type Lock struct {
	f *os.File // the lock file, open while the lock is held
}

// Acquire takes dir's lock without waiting, creating the lock file with
// mode if needed: exclusive for a writer, shared for a reader.
func Acquire(dir string, mode os.FileMode, exclusive bool) (*Lock, error) {
	path := filepath.Join(dir, Name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, mode)
	if err != nil {
		return nil, fmt.Errorf("dirlock: open %s: %w", path, err)
	}
	return hold(f, exclusive)
}

// AcquireShared takes dir's lock shared without creating or writing
// anything. It returns a nil Lock and a nil error when dir has no lock file:
// no writer has ever opened it.
func AcquireShared(dir string) (*Lock, error) {
	path := filepath.Join(dir, Name)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dirlock: open %s: %w", path, err)
	}
	return hold(f, false)
}

// hold locks f, closing it on failure.
func hold(f *os.File, exclusive bool) (*Lock, error) {
	if err := lockFile(f, exclusive); err != nil {
		f.Close()
		if errors.Is(err, ErrLocked) || errors.Is(err, ErrUnsupported) {
			return nil, err
		}
		return nil, fmt.Errorf("dirlock: lock %s: %w", f.Name(), err)
	}
	return &Lock{f: f}, nil
}

// Release drops the lock and closes the lock file. A nil Lock is a no-op.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	uerr := unlockFile(f)
	cerr := f.Close()
	if uerr != nil {
		return fmt.Errorf("dirlock: unlock %s: %w", f.Name(), uerr)
	}
	return cerr
}
