//go:build unix

package queue_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// Every file and directory a queue creates (its directory, the log's,
// segments, snapshots, the lock and identity files) has the modes the
// README promises, 0600 and 0700 by default, or Options.FileMode and
// DirMode, whatever the process's umask lets through.
func TestCreatedFilesHaveTheirModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	for name, c := range map[string]struct {
		opts            *queue.Options
		file, directory fs.FileMode
	}{
		"defaults": {&queue.Options{}, 0o600, 0o700},
		"options":  {&queue.Options{FileMode: 0o640, DirMode: 0o750}, 0o640, 0o750},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "a", "q")
			c.opts.SegmentSize = 4096
			testhook.SetManualCompaction(c.opts)
			q := open(t, dir, c.opts)
			for range 40 { // several segments, then a snapshot and its truncation
				m := enqueueDequeue(t, q, string(make([]byte, 200)))
				require.NoError(t, m.Ack())
			}
			enqueue(t, q, "kept")
			require.NoError(t, q.Compact())
			require.NoError(t, q.Close())
			requireModes(t, filepath.Dir(dir), c.file, c.directory)
		})
	}
}

// enqueueDequeue enqueues payload and dequeues it.
func enqueueDequeue(t *testing.T, q *queue.Queue, payload string) *queue.Message {
	t.Helper()
	_, err := q.Enqueue(context.Background(), []byte(payload), queue.WithDelay(-time.Second))
	require.NoError(t, err)
	return tryDequeue(t, q)
}

// requireModes checks the permission bits of everything under root (root
// itself left out: the test made its parent).
func requireModes(t *testing.T, root string, file, directory fs.FileMode) {
	t.Helper()
	var files, dirs int
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		want := file
		if info.IsDir() {
			want, dirs = directory, dirs+1
		} else {
			files++
		}
		require.Equal(t, want, info.Mode().Perm(), "%s", path)
		return nil
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, dirs, 2, "the queue's directory and its parent")
	require.GreaterOrEqual(t, files, 3, "segments, a snapshot, the lock and identity files")
}
