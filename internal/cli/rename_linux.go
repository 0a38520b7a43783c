//go:build linux

package cli

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// RenameNoReplace renames oldpath to newpath unless newpath exists,
// checked and renamed in one step by renameat2(2) with RENAME_NOREPLACE:
// an existing newpath fails with EEXIST (fs.ErrExist), even an empty
// directory, which rename(2) would replace. A kernel or file system
// without the flag (ENOSYS, EINVAL) gets os.Rename, and only the
// caller's check beforehand.
func (b backupOS) RenameNoReplace(oldpath, newpath string) error {
	err := renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL):
		return b.Rename(oldpath, newpath)
	}
	return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
}

// renameat2 is unix.Renameat2; a test replaces it to play a kernel or a
// file system that refuses the flag.
var renameat2 = unix.Renameat2
