package queue_test

import (
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/queue"
)

// TestSettleDeadLogFollowsDisk: a Settle that dead-letters messages logs
// each one ("queue: message dead-lettered") only once its commit is as
// durable as the sync mode promises. A power loss at any durable
// operation of the open, the delivery, the Settle and the Close leaves a
// directory whose reopened queue holds every message so logged in its
// dead set, also when the fsync of the Settle's commit is the one that
// fails.
func TestSettleDeadLogFollowsDisk(t *testing.T) {
	const states = 10
	src := filepath.Join(t.TempDir(), "q")
	q := open(t, src, &queue.Options{ManualRequeue: true})
	enqueue(t, q, "pa", queue.WithID("a"))
	enqueue(t, q, "pb", queue.WithID("b"))
	require.NoError(t, q.Close())
	for crashAt := 1; ; crashAt++ {
		root := t.TempDir()
		copyTree(t, src, filepath.Join(root, "q"))
		fsys, err := crashfs.New(root, crashAt)
		require.NoError(t, err)
		logger, logs := newLogger(slog.LevelInfo)
		q, err := queue.Open(filepath.Join(root, "q"), &queue.Options{FS: fsys, ManualRequeue: true, Logger: logger})
		if err == nil {
			err = deadLetterTwo(q)
			err = errors.Join(err, q.Close())
		}
		var logged []string
		for _, l := range logs.lines(t, "queue: message dead-lettered") {
			logged = append(logged, l["id"].(string))
		}
		if !fsys.Crashed() {
			require.NoError(t, err)
			require.ElementsMatch(t, []string{"a", "b"}, logged, "without a crash both are logged")
			t.Logf("%d durable operations, %d crash states each", crashAt-1, states)
			return
		}
		requireLoggedDeadKept(t, fsys, crashAt, states, 29, logged, deadIDs)
	}
}

// deadLetterTwo takes the two messages of q and dead-letters both in one
// Settle.
func deadLetterTwo(q *queue.Queue) error {
	var ss []queue.Settlement
	for range 2 {
		m, err := q.TryDequeue()
		if err != nil {
			return err
		}
		ss = append(ss, queue.Settlement{Receipt: m.Receipt, Op: queue.SettleDeadLetter, Reason: "poison"})
	}
	return q.Settle(ss...)
}
