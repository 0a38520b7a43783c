package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/faultfs"
)

// TestBackupRemovesOnlyItsPartialCopy: a backup that fails removes the
// directory it created, and nothing else: not a directory that was there
// before, not what a link names, not the queue directory.
func TestBackupRemovesOnlyItsPartialCopy(t *testing.T) {
	e := &env{}
	base := t.TempDir()
	outside := filepath.Join(base, "outside") // a user's directory
	require.NoError(t, os.Mkdir(outside, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "keep"), []byte("mine"), 0o600))
	src := filepath.Join(base, "q")
	require.NoError(t, os.Mkdir(src, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("log"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(src, "z-link"))) // refused, after "a" is copied

	requireKept := func() {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(outside, "keep"))
		require.NoError(t, err, "the user's file")
		require.Equal(t, "mine", string(b))
		b, err = os.ReadFile(filepath.Join(src, "a"))
		require.NoError(t, err, "the queue's file")
		require.Equal(t, "log", string(b))
		_, err = os.Lstat(filepath.Join(src, "z-link"))
		require.NoError(t, err, "the queue's link")
	}

	t.Run("copy fails", func(t *testing.T) {
		dst := filepath.Join(base, "bak")
		_, err := backupDir(e, src, dst)
		require.ErrorContains(t, err, "is not a regular file")
		require.ErrorContains(t, err, "(the partial backup was removed)")
		require.NotContains(t, err.Error(), "--backup", "the disk is not full: no way out named for it")
		for _, p := range []string{dst, dst + partialSuffix} {
			_, serr := os.Lstat(p)
			require.ErrorIs(t, serr, os.ErrNotExist, "the partial copy is removed: %s", p)
		}
		requireKept()
	})
	t.Run("a directory there before", func(t *testing.T) {
		_, err := backupDir(e, src, outside)
		require.ErrorContains(t, err, "already exists")
		require.NotContains(t, err.Error(), "removed")
		requireKept()
	})
	t.Run("a link to a directory", func(t *testing.T) {
		link := filepath.Join(base, "link")
		require.NoError(t, os.Symlink(outside, link))
		_, err := backupDir(e, src, link)
		require.ErrorContains(t, err, "already exists")
		requireKept()
	})
	t.Run("inside the queue directory", func(t *testing.T) {
		_, err := backupDir(e, src, filepath.Join(src, "bak"))
		require.ErrorContains(t, err, "is inside")
		requireKept()
	})
}

// TestBackupFailsAtEachStep: a backup whose any one write, fsync or rename
// fails returns the failure and leaves the queue directory as it was, and
// under the backup's names either nothing (the partial copy removed), or,
// when only the fsync of the name after the rename failed, the whole copy,
// which the error says is kept.
func TestBackupFailsAtEachStep(t *testing.T) {
	src := filepath.Join(t.TempDir(), "q")
	makeAckedQueue(t, src)
	want := treeFiles(t, src)
	failed := map[string]bool{} // the kinds of operation failed
	for n := 1; ; n++ {
		fsys := faultfs.New(n)
		dst := filepath.Join(t.TempDir(), "q.bak")
		_, err := backupDir(&env{backupFS: fsys}, src, dst)
		op, hit := fsys.Hit()
		if !hit {
			require.NoError(t, err)
			require.Equal(t, want, treeFiles(t, dst))
			require.True(t, failed["rename"] && failed["name's dirsync"], "the rename and its fsync were failed: %v", failed)
			t.Logf("%d operations, each failed once", n-1)
			return
		}
		failed[op.Kind] = true
		at := fmt.Sprintf("operation %d (%s %s) failed", n, op.Kind, op.Path)
		require.ErrorIs(t, err, faultfs.ErrInjected, at)
		require.Equal(t, want, treeFiles(t, src), "%s: the queue directory changed", at)
		_, perr := os.Lstat(dst + partialSuffix)
		require.ErrorIs(t, perr, os.ErrNotExist, "%s: the partial copy is left", at)
		if op.Kind == "dirsync" && op.Path == filepath.Dir(dst) {
			failed["name's dirsync"] = true
			require.Equal(t, want, treeFiles(t, dst), "%s: the renamed copy is not whole", at)
			require.ErrorContains(t, err, "the whole copy is kept as "+dst, at)
			continue
		}
		_, derr := os.Lstat(dst)
		require.ErrorIs(t, derr, os.ErrNotExist, "%s: something is left under the backup's name", at)
		require.ErrorContains(t, err, "(the partial backup was removed)", at)
	}
}
