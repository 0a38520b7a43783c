package queue_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// overtakingFS runs compact, as the running queue's compaction, each time
// a read-only open has opened a snapshot file and before it reads it, for
// the first times opens: the snapshot the reader loads is then an older
// one than the newest, and the log it opens next was cut past what that
// snapshot needs.
type overtakingFS struct {
	wal.OSFS
	times   int
	compact func()
}

func (f *overtakingFS) Open(name string) (wal.File, error) {
	file, err := f.OSFS.Open(name)
	if err == nil && f.times > 0 && strings.HasSuffix(name, ".snap") {
		f.times--
		f.compact()
	}
	return file, err
}

// TestReadOnlyOvertakenByCompactions: a read-only open beside a healthy
// running queue whose compactions cut the log under each of the open's
// first ten tries reads the queue on a later try. One overtaken without
// end gives up with ErrLocked. It never reports ErrCorrupt, whose advice
// (repair the directory) is wrong for a healthy queue.
func TestReadOnlyOvertakenByCompactions(t *testing.T) {
	t.Run("reads", func(t *testing.T) { readOnlyOvertaken(t, 10) })
	t.Run("gives up", func(t *testing.T) { readOnlyOvertaken(t, 1000) })
}

func readOnlyOvertaken(t *testing.T, compactions int) {
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{SegmentSize: 4 << 10, Sync: queue.SyncNever})
	defer q.Close()
	ctx := context.Background()
	round := 0
	cycle := func() {
		round++
		for i := range 50 {
			enqueue(t, q, strings.Repeat("x", 100)+string(rune('a'+i%26)))
		}
		for range 50 {
			m, err := q.Dequeue(ctx)
			require.NoError(t, err)
			require.NoError(t, m.Ack())
		}
		require.NoError(t, q.Compact())
	}
	cycle()
	enqueue(t, q, "kept")
	require.NoError(t, q.Compact())

	fsys := &overtakingFS{times: compactions, compact: cycle}
	r, err := queue.Open(dir, &queue.Options{ReadOnly: true, FS: fsys})
	if compactions > 100 {
		require.ErrorIs(t, err, queue.ErrLocked)
		require.NotErrorIs(t, err, queue.ErrCorrupt)
		require.Positive(t, fsys.times, "the open gave up")
		return
	}
	require.NoError(t, err, "after %d compactions under the open", round-1)
	defer r.Close()
	require.Zero(t, fsys.times, "every compaction ran under a try")
	require.EqualValues(t, 1, r.Stats().Ready)
}
