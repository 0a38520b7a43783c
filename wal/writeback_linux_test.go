//go:build linux

package wal

import (
	"errors"
	"testing"

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
