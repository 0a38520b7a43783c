//go:build linux

package wal

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing f's dirty pages in
// [off, off+n) back to the disk, and returns without waiting for them
// (sync_file_range with SYNC_FILE_RANGE_WRITE: nothing becomes durable).
// A File that does not show its descriptor (syscall.Conn) is left alone.
func startWriteback(f File, off, n int64) error {
	sc, ok := f.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		for {
			serr = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
			if serr != unix.EINTR {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	return serr
}
