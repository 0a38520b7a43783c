//go:build linux

package wal

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWritebackErrno: how a failed sync_file_range is taken. A transient
// shortage (ENOMEM, EAGAIN) skips that hint alone: the pages stay dirty
// and the next fsync writes them, so the Log must stay healthy; an
// unsupported hint is not made again; an I/O error poisons.
func TestWritebackErrno(t *testing.T) {
	for name, tc := range map[string]struct {
		errno     error
		supported bool
		poisons   bool
	}{
		"ok":         {nil, true, false},
		"ENOMEM":     {unix.ENOMEM, true, false},
		"EAGAIN":     {unix.EAGAIN, true, false},
		"ENOSYS":     {unix.ENOSYS, false, false},
		"EINVAL":     {unix.EINVAL, false, false},
		"EOPNOTSUPP": {unix.EOPNOTSUPP, false, false},
		"ESPIPE":     {unix.ESPIPE, false, false},
		"EIO":        {unix.EIO, true, true},
		"ENOSPC":     {unix.ENOSPC, true, true},
	} {
		t.Run(name, func(t *testing.T) {
			supported, err := writebackOutcome(tc.errno)
			if supported != tc.supported || (err != nil) != tc.poisons {
				t.Fatalf("sync_file_range failing with %v: supported %v, error %v; want supported %v, poisoning %v",
					tc.errno, supported, err, tc.supported, tc.poisons)
			}
			if tc.poisons && !errors.Is(err, tc.errno) {
				t.Fatalf("error %v does not wrap %v", err, tc.errno)
			}
		})
	}
}

// errnoFS is the real file system whose files fail every write-back hint
// with errno, as sync_file_range itself would.
type errnoFS struct {
	OSFS
	errno error
}

func (fs errnoFS) Open(name string) (File, error) {
	f, err := fs.OSFS.Open(name)
	if err != nil {
		return nil, err
	}
	return errnoFile{File: f, errno: fs.errno}, nil
}

// errnoFile is a File whose sync_file_range fails with errno.
type errnoFile struct {
	File
	errno error
}

func (f errnoFile) syncFileRange(int64, int64) error { return f.errno }

// TestWritebackErrnoPoisons: a write-back hint that sync_file_range fails
// with an errno that is neither a shortage (ENOMEM, EAGAIN) nor
// unsupported, met by the write-back goroutine on the tail's handle,
// poisons the Log: later appends and Close return that errno. A shortage
// leaves it healthy.
func TestWritebackErrnoPoisons(t *testing.T) {
	for _, errno := range []unix.Errno{unix.EIO, unix.ENOSPC, unix.EBADF} {
		t.Run(errno.Error(), func(t *testing.T) {
			l, err := Open(t.TempDir(), &Options{Sync: SyncNever, FS: errnoFS{errno: errno}})
			if err != nil {
				t.Fatal(err)
			}
			_ = writeMiB(l, 1) // the hint fails in the background, during or after these
			select {
			case <-l.Poisoned():
			case <-time.After(10 * time.Second):
				t.Fatalf("a write-back hint failing with %v left the Log healthy", errno)
			}
			if err := writeMiB(l, 1); !errors.Is(err, errno) {
				t.Fatalf("append after the failed hint = %v; want %v", err, errno)
			}
			if err := l.Close(); !errors.Is(err, errno) {
				t.Fatalf("Close = %v; want %v", err, errno)
			}
		})
	}
	t.Run("ENOMEM", func(t *testing.T) {
		l, err := Open(t.TempDir(), &Options{Sync: SyncNever, FS: errnoFS{errno: unix.ENOMEM}})
		if err != nil {
			t.Fatal(err)
		}
		if err := writeMiB(l, 3); err != nil {
			t.Fatalf("appends under hints refused for lack of memory: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	})
}
