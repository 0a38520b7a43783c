package queue_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
)

// TestCompactionSnapshotFsyncFailure: a compaction whose snapshot file's
// fsync fails returns the error and poisons nothing: later writes work, a
// later compaction succeeds, and a reopen delivers every message.
func TestCompactionSnapshotFsyncFailure(t *testing.T) {
	ctx := context.Background()
	start := func(failAt int) (*queue.Queue, *faultfs.FS, string, int) {
		fs := faultfs.New(failAt)
		dir := t.TempDir()
		q := open(t, dir, &queue.Options{FS: fs, ManualRequeue: true})
		_, err := q.Enqueue(ctx, []byte("v"))
		require.NoError(t, err)
		return q, fs, dir, len(fs.Ops())
	}
	dry, fs, _, before := start(0)
	require.NoError(t, dry.Compact())
	at := 0
	for i, op := range fs.Ops()[before:] {
		if op.Kind == "fsync" && strings.Contains(op.Path, "snap") {
			at = before + i + 1
			break
		}
	}
	require.NoError(t, dry.Close())
	require.NotZero(t, at, "no snapshot fsync among %v", fs.Ops()[before:])

	q, _, dir, _ := start(at)
	require.ErrorIs(t, q.Compact(), faultfs.ErrInjected, "the compaction meets the failed fsync")
	_, err := q.Enqueue(ctx, []byte("w"))
	require.NoError(t, err, "a failed snapshot poisons nothing")
	require.NoError(t, q.Compact(), "a later compaction tries again")
	require.NoError(t, q.Close())

	q = open(t, dir, &queue.Options{ManualRequeue: true})
	defer q.Close()
	var got []string
	for {
		m, err := q.TryDequeue()
		if err != nil {
			require.ErrorIs(t, err, queue.ErrEmpty)
			break
		}
		got = append(got, string(m.Payload))
		require.NoError(t, m.Ack())
	}
	require.Equal(t, []string{"v", "w"}, got)
}
