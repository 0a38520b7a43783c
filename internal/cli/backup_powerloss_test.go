package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/crashfs"
)

// TestBackupPowerLoss: a power loss at any moment of a backup (at each of
// its fsyncs, and just after it returned) leaves under the backup's name
// either nothing or the whole queue directory, byte for byte; and once the
// backup has returned, the whole copy. The states are those a power loss
// can leave (package crashfs): names as their directory's last fsync left
// them, as they were, or a mix; unsynced bytes lost or torn.
func TestBackupPowerLoss(t *testing.T) {
	src := filepath.Join(t.TempDir(), "q")
	makeAckedQueue(t, src)
	want := treeFiles(t, src)
	const states = 8 // per crash point
	for k := 1; ; k++ {
		root := t.TempDir()
		fsys, err := crashfs.New(root, k)
		require.NoError(t, err)
		dst := filepath.Join(root, "q.bak")
		_, err = backupDir(&env{backupFS: fsys}, src, dst)
		returned := !fsys.Crashed()
		if returned {
			require.NoError(t, err)
			require.NoError(t, fsys.Image()) // the power goes once it returned
		}
		for v := range states {
			state := filepath.Join(t.TempDir(), "s")
			st, err := fsys.Materialize(state, rand.New(rand.NewPCG(uint64(k), uint64(v))))
			require.NoError(t, err)
			at := fmt.Sprintf("power lost at durable operation %d (backup returned: %v), state %d (%s)", k, returned, v, st.Desc)
			bak := filepath.Join(state, "q.bak")
			if _, err := os.Lstat(bak); err != nil {
				require.False(t, returned, "%s: the backup it reported made is gone", at)
				continue
			}
			require.Equal(t, want, treeFiles(t, bak), "%s: the backup's name holds another tree than the queue's", at)
		}
		if returned {
			t.Logf("%d crash points, %d states each", k, states)
			return
		}
	}
}

// treeFiles returns every regular file under root, by its path relative
// to root, with its bytes.
func treeFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			return errors.New(path + " is not a regular file")
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(root, path)
		files[rel] = string(b)
		return err
	})
	require.NoError(t, err)
	return files
}
