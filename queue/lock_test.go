package queue_test

import (
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// TestOneLockFile: a queue directory has one lock file, at its root; the
// log below it takes no second one.
func TestOneLockFile(t *testing.T) {
	dir := t.TempDir()
	q, err := queue.Open(dir, nil)
	require.NoError(t, err)
	var locks []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "LOCK" {
			rel, _ := filepath.Rel(dir, p)
			locks = append(locks, rel)
		}
		return err
	}))
	require.Equal(t, []string{"LOCK"}, locks)
	_, err = queue.Open(dir, nil)
	require.ErrorIs(t, err, queue.ErrLocked)
	require.NoError(t, q.Close())
	q, err = queue.Open(dir, nil)
	require.NoError(t, err)
	require.NoError(t, q.Close())
}
