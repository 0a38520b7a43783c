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
	dst := filepath.Join(base, "q.bak")
	part := dst + partialSuffix
	const rounds = 1000
	stop := make(chan struct{})
	var replaced atomic.Bool
	made := 0
	var wg sync.WaitGroup
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
	close(stop)
	wg.Wait()
	t.Logf("%d rounds: %d published, %d directories made meanwhile", round, published, made)
	require.False(t, replaced.Load(), "a directory made at the backup's name was replaced by the copy (round %d)", round)
}

// unsyncedOS is the backup's file system without the fsync of directories,
// which a test that only renames does not need and would spend its time in.
type unsyncedOS struct{ backupOS }

func (unsyncedOS) SyncDir(string) error { return nil }
