package queue_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/queue"
)

// TestDeliveryDeadLogFollowsDisk: a delivery that finds ready messages
// past MaxDeliveries dead-letters them on its way and logs each one
// ("queue: message dead-lettered"). A power loss at any durable operation
// of that open, delivery and close leaves a directory whose reopened queue
// holds every message so logged in its dead set: the log never claims a
// move that the disk may not keep, also when the fsync of the
// dead-letter's record is the one that fails. The records of those
// dead-letterings start no fsync of their own: one durable operation
// (the first fsync after the delivery) covers them, and at it only a
// state that loses them tells a note logged before that fsync from one
// logged after; the judge builds that state at every crash point
// (requireLoggedDeadKept), not by chance among the sampled ones.
func TestDeliveryDeadLogFollowsDisk(t *testing.T) {
	const states = 3
	src := filepath.Join(t.TempDir(), "q")
	deliveredOnce(t, src, "a", "b") // ready again, one delivery each
	for crashAt := 1; ; crashAt++ {
		root := t.TempDir()
		copyTree(t, src, filepath.Join(root, "q"))
		fsys, err := crashfs.New(root, crashAt)
		require.NoError(t, err)
		logger, logs := newLogger(slog.LevelInfo)
		q, err := queue.Open(filepath.Join(root, "q"), &queue.Options{FS: fsys, MaxDeliveries: 1, ManualRequeue: true, Logger: logger})
		if err == nil {
			m, derr := q.TryDequeue()
			if derr == nil {
				require.Equal(t, "c", m.ID, "the delivery after the dead-letterings")
			}
			err = q.Close()
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
		requireLoggedDeadKept(t, fsys, crashAt, states, 23, logged, deadIDs)
	}
}

// deliveredOnce makes a queue in dir holding the messages ids, delivered
// and nacked once each, ready again, then a message "c" never delivered.
func deliveredOnce(t *testing.T, dir string, ids ...string) {
	t.Helper()
	ctx := context.Background()
	q := open(t, dir, &queue.Options{MaxDeliveries: -1, ManualRequeue: true})
	for _, id := range ids {
		enqueue(t, q, "p"+id, queue.WithID(id))
	}
	var ms []*queue.Message
	for range ids {
		ms = append(ms, tryDequeue(t, q))
	}
	for _, m := range ms {
		require.NoError(t, m.Nack(0))
	}
	_, err := q.Enqueue(ctx, []byte("pc"), queue.WithID("c"))
	require.NoError(t, err)
	require.NoError(t, q.Close())
}

// deadIDs opens the queue in dir and returns the ids in its dead set.
func deadIDs(t *testing.T, dir string) ([]string, error) {
	t.Helper()
	q, err := queue.Open(dir, &queue.Options{MaxDeliveries: -1, ManualRequeue: true, AckTimeout: time.Hour})
	if err != nil {
		return nil, err
	}
	defer func() { require.NoError(t, q.Close()) }()
	ds, err := q.DeadLetters(0, 0)
	require.NoError(t, err)
	var ids []string
	for _, d := range ds {
		ids = append(ids, d.ID)
	}
	slices.Sort(ids)
	return ids, nil
}
