//go:build linux

package cli

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestBackupNeverReplacesDirectoryMadeMeanwhile: an empty directory that
// another process makes at the backup's name while the backup gives its
// copy that name is never replaced by the copy, as rename(2) replaces an
// empty directory: the backup either takes the name before the directory
// is made (and the mkdir fails), or is refused. A process makes and
// removes the directory in a loop while the backup is published again and
// again; a removal that finds the directory not empty found the copy in
// its place.
func TestBackupNeverReplacesDirectoryMadeMeanwhile(t *testing.T) {
	base := t.TempDir()
	requireNoReplace(t, base)
	dst := filepath.Join(base, "q.bak")
	part := dst + partialSuffix
	const rounds = 1000
	stop := make(chan struct{})
	var replaced atomic.Bool
	made := 0
	var wg sync.WaitGroup
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer halt() // also when a require below ends the test: the loop must not outlive it
	wg.Add(1)
	go func() { // the other process
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if os.Mkdir(dst, 0o700) != nil {
				continue // the copy has the name
			}
			made++
			if err := os.Remove(dst); errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
				replaced.Store(true) // the copy took the place of its directory
				return
			}
		}
	}()
	published, round := 0, 0
	for ; round < rounds && !replaced.Load(); round++ {
		require.NoError(t, os.Mkdir(part, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(part, "f"), []byte("copy"), 0o600))
		renamed, err := publishBackup(unsyncedOS{}, part, dst)
		if renamed {
			require.NoError(t, err)
			published++
			require.NoError(t, os.RemoveAll(dst))
			continue
		}
		require.ErrorContains(t, err, "appeared during the copy")
		require.NoError(t, os.RemoveAll(part))
	}
	halt()
	t.Logf("%d rounds: %d published, %d directories made meanwhile", round, published, made)
	require.False(t, replaced.Load(), "a directory made at the backup's name was replaced by the copy (round %d)", round)
}

// requireNoReplace skips the test where the file system of dir refuses
// renameat2's RENAME_NOREPLACE (NFS, some FUSE): there the backup falls
// back to a plain rename, whose gap this test would find, as the help of
// repair says (TestRenameNoReplaceFallback covers that path).
func requireNoReplace(t *testing.T, dir string) {
	t.Helper()
	a, b := filepath.Join(dir, "probe-a"), filepath.Join(dir, "probe-b")
	require.NoError(t, os.WriteFile(a, nil, 0o600))
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
		t.Skipf("the file system of %s refuses RENAME_NOREPLACE (%v): the backup's plain-rename fallback has the gap this test looks for", dir, err)
	}
	require.NoError(t, err)
	require.NoError(t, os.Remove(b))
}

// unsyncedOS is the backup's file system without the fsync of directories,
// which a test that only renames does not need and would spend its time in.
type unsyncedOS struct{ backupOS }

func (unsyncedOS) SyncDir(string) error { return nil }
