//go:build linux

package wal

import (
	"errors"

	"golang.org/x/sys/unix"
)

// writebackHints reports whether the platform has write-back hints, so
// that the Log runs the write-back goroutine (writeback.go).
const writebackHints = true

// rangeWriter is a File that can start the write-back of a range of its
// dirty pages without waiting for it (osFile).
type rangeWriter interface {
	syncFileRange(off, n int64) error
}

// flushable reports whether the tail's File is one the write-back
// goroutine flushes before its roll: one it can hint.
func flushable(f File) bool {
	_, ok := f.(rangeWriter)
	return ok
}

// startWriteback hints f's range [off, off+n) to be written back; a File
// that cannot be hinted is not (supported false). What a failure means is
// writebackOutcome's to say.
func startWriteback(f File, off, n int64) (bool, error) {
	w, ok := f.(rangeWriter)
	if !ok {
		return false, nil
	}
	return writebackOutcome(w.syncFileRange(off, n))
}

// syncFileRange starts the write-back of [off, off+n) of f
// (sync_file_range(2), SYNC_FILE_RANGE_WRITE: it does not wait for it),
// and returns its errno.
func (f osFile) syncFileRange(off, n int64) error {
	for {
		err := unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// writebackOutcome says what sync_file_range's err means for the hints:
// whether the file system supports them, and the error that poisons the
// Log. A shortage (ENOMEM, EAGAIN) only skips this hint: the kernel keeps
// the pages dirty and the next fsync writes them, as it reports any
// write-back that failed; poisoning the Log for it would fail a healthy
// Log under memory pressure.
func writebackOutcome(err error) (supported bool, _ error) {
	switch {
	case err == nil, errors.Is(err, unix.ENOMEM), errors.Is(err, unix.EAGAIN):
		return true, nil
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EINVAL),
		errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ESPIPE):
		return false, nil
	default:
		return true, err
	}
}
