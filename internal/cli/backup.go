package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/walq/walq/wal"
)

// backupDir copies the tree at src to dst, which must not exist, and
// fsyncs every file and directory it creates, so that the copy is on disk
// before the caller changes src. It returns the bytes copied. A src that
// is a symbolic link (a queue directory on a volume mounted elsewhere) is
// copied as the directory it names; a link inside the tree is refused.
//
// The copy is made under the name dst + partialSuffix and renamed to dst
// once it is complete and synced, so that dst never names a part of the
// queue: a backup killed half-way (kill -9, a power loss) leaves a
// ".partial" directory, never one that opens as the queue with its newest
// segments missing, which delivers acknowledged messages again and lacks
// acknowledged enqueues.
func backupDir(e *env, src, dst string) (int64, error) {
	dst = filepath.Clean(dst) // "bak/" is named "bak", its copy "bak.partial"
	if _, err := os.Lstat(dst); err == nil {
		return 0, fmt.Errorf("backup %s already exists", dst)
	}
	part := dst + partialSuffix
	if _, err := os.Lstat(part); err == nil {
		return 0, fmt.Errorf("backup %s: %s already exists, left by a backup that did not finish; remove it", dst, part)
	}
	root, err := filepath.EvalSymlinks(src)
	if err != nil {
		return 0, fmt.Errorf("backup %s: %w", src, err)
	}
	if inside(root, dst) || inside(root, part) {
		return 0, fmt.Errorf("backup %s is inside %s", dst, src)
	}
	fsys := e.backupFS
	if fsys == nil {
		fsys = backupOS{}
	}
	n, made, err := copyTree(e, fsys, root, part)
	if err == nil {
		err = syncTree(fsys, part)
	}
	renamed := false
	if err == nil {
		renamed, err = publishBackup(fsys, part, dst)
	}
	if err == nil {
		return n, nil
	}
	// A partial copy (a full disk, most often) is of no use and holds the
	// space that the next attempt, or the service, needs.
	err = fmt.Errorf("backup %s to %s: %w", src, dst, err)
	switch {
	case renamed: // only its name's fsync failed
		err = fmt.Errorf("%w (the whole copy is kept as %s)", err, dst)
	case made:
		if rerr := os.RemoveAll(part); rerr != nil {
			return n, fmt.Errorf("%w; removing the partial backup %s: %v", err, part, rerr)
		}
		err = fmt.Errorf("%w (the partial backup was removed)", err)
	}
	if diskFull(err) {
		err = fmt.Errorf("%w: free space, or give --backup PATH on another disk", err)
	}
	return n, err
}

// partialSuffix ends the name of a backup being copied (backupDir).
const partialSuffix = ".partial"

// publishBackup gives the complete, synced copy at part its name dst and
// makes the rename durable; renamed says whether part is now dst (a
// failed fsync of the parent leaves the whole copy there, not to be
// removed). A dst made meanwhile is refused, not replaced: where fsys can
// rename without replacing (exclusiveRenamer), even one made between the
// check and the rename. Elsewhere an empty directory made there in that
// gap is replaced by rename(2): os.Rename checks for a directory at the
// new name, but with the same gap before its rename(2).
func publishBackup(fsys wal.FS, part, dst string) (renamed bool, err error) {
	if _, err := os.Lstat(dst); err == nil {
		return false, fmt.Errorf("%s appeared during the copy", dst)
	}
	if err := renameExclusive(fsys, part, dst); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, fmt.Errorf("%s appeared during the copy: %w", dst, err)
		}
		return false, err
	}
	return true, wal.SyncDirFS(fsys, filepath.Dir(dst))
}

// exclusiveRenamer is a wal.FS that can rename without replacing what the
// new name holds, in one step: RenameNoReplace fails with an error that
// is fs.ErrExist when newpath exists.
type exclusiveRenamer interface {
	RenameNoReplace(oldpath, newpath string) error
}

// renameExclusive renames oldpath to newpath through fsys, without
// replacing newpath where fsys can (exclusiveRenamer); elsewhere it is
// fsys.Rename, and the caller's check that newpath does not exist is all
// there is.
func renameExclusive(fsys wal.FS, oldpath, newpath string) error {
	if r, ok := fsys.(exclusiveRenamer); ok {
		return r.RenameNoReplace(oldpath, newpath)
	}
	return fsys.Rename(oldpath, newpath)
}

// backupOS is the real file system the backup writes through: wal.OSFS,
// with RenameNoReplace where the platform has it (rename_linux.go).
type backupOS struct{ wal.OSFS }

// copyTree copies the tree at root to the new directory dst, writing the
// files through fsys and reporting progress. made says whether it created
// dst (to be removed if the copy fails; a dst made by another process is
// left alone).
func copyTree(e *env, fsys wal.FS, root, dst string) (n int64, made bool, err error) {
	bar := e.bytesBar(treeBytes(root), "backup")
	defer bar.done()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			err := os.Mkdir(target, 0o700)
			made = made || (err == nil && rel == ".")
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("backup: %s is not a regular file", path)
		}
		c, err := copyFile(fsys, path, target)
		n += c
		bar.add(c)
		if err == nil && e.backupCopied != nil {
			e.backupCopied(rel)
		}
		return err
	})
	return n, made, err
}

// copyFile copies the regular file src to the new file dst, written
// through fsys, with src's permissions, and fsyncs it.
func copyFile(fsys wal.FS, src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return 0, err
	}
	out, err := fsys.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fi.Mode().Perm())
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// syncTree fsyncs, through fsys, every directory under root, root
// included, so that the names of the copied files are durable too.
func syncTree(fsys wal.FS, root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return wal.SyncDirFS(fsys, path)
	})
}

// treeBytes returns the bytes of the regular files under root, for
// progress; errors are left for the copy to report.
func treeBytes(root string) int64 {
	var n int64
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// inside reports whether path is dir or lies under it, by the names
// they have once symbolic links are resolved (path need not exist).
func inside(dir, path string) bool {
	a, err1 := realPath(dir)
	b, err2 := realPath(path)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(a, b)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// realPath returns path made absolute with its symbolic links resolved;
// for a path that does not exist, its parent's resolved.
func realPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r, nil
	}
	parent, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return abs, nil
	}
	return filepath.Join(parent, filepath.Base(abs)), nil
}
