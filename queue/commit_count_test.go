package queue_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// The README's group-commit promises, counted in the calls the file
// system receives under SyncAlways: a delivery (Dequeue, DequeueBatch,
// Pull) writes its lease and makes no fsync of its own, and the ack that
// follows makes one fsync, which covers both; an EnqueueBatch, and the
// Ack of what DequeueBatch returned, are one write and one fsync however
// many messages they hold.
func TestOneCommitPerCall(t *testing.T) {
	ctx := context.Background()
	const n = 5
	for name, run := range map[string]func(t *testing.T, q *queue.Queue, step func(what string, writes, fsyncs int)){
		"Dequeue then Ack": func(t *testing.T, q *queue.Queue, step func(string, int, int)) {
			enqueue(t, q, "a")
			step("", -1, -1)
			m, err := q.Dequeue(ctx)
			require.NoError(t, err)
			step("Dequeue", 1, 0)
			require.NoError(t, m.Ack())
			step("Ack", 1, 1)
		},
		"EnqueueBatch, DequeueBatch, Ack": func(t *testing.T, q *queue.Queue, step func(string, int, int)) {
			items := make([]queue.Item, n)
			for i := range items {
				items[i].Payload = []byte("v")
			}
			_, err := q.EnqueueBatch(ctx, items)
			require.NoError(t, err)
			step("EnqueueBatch", 1, 1)
			ms, err := q.DequeueBatch(ctx, n)
			require.NoError(t, err)
			require.Len(t, ms, n)
			step("DequeueBatch", 1, 0)
			require.NoError(t, ms.Ack())
			step("Ack of the batch", 1, 1)
		},
	} {
		t.Run(name, func(t *testing.T) {
			fs := faultfs.New(0)
			opts := &queue.Options{FS: fs, ManualRequeue: true, AppendOnly: true} // the writes counted are the calls', not the zeros ahead of the tail
			testhook.SetManualCompaction(opts)
			q := open(t, t.TempDir(), opts)
			defer q.Close()
			run(t, q, countingStep(t, fs))
		})
	}
	t.Run("Pull then Ack", func(t *testing.T) {
		fs := faultfs.New(0)
		opts := &queue.SortedOptions{Options: queue.Options{FS: fs, ManualRequeue: true, AppendOnly: true}}
		testhook.SetManualCompaction(&opts.Options)
		s, err := queue.OpenSorted[int64](t.TempDir(), opts)
		require.NoError(t, err)
		defer s.Close()
		step := countingStep(t, fs)
		for i := range n {
			require.NoError(t, s.Publish(ctx, int64(i), "k", []byte("v")))
		}
		step("", -1, -1)
		bs, err := s.Pull(ctx, n)
		require.NoError(t, err)
		require.Len(t, bs, 1)
		step("Pull", 1, 0)
		require.NoError(t, bs[0].Ack())
		step("Ack", 1, 1)
	})
}

// countingStep returns a function that checks the writes and fsyncs fs
// received since its last call (a negative count: not checked).
func countingStep(t *testing.T, fs *faultfs.FS) func(what string, writes, fsyncs int) {
	seen := len(fs.Ops())
	return func(what string, writes, fsyncs int) {
		t.Helper()
		ops := fs.Ops()
		var w, f int
		for _, op := range ops[seen:] {
			switch op.Kind {
			case "write", wal.StoreWriteBatch:
				w++
			case "fsync":
				f++
			}
		}
		seen = len(ops)
		if writes >= 0 {
			require.Equal(t, writes, w, "%s: writes", what)
		}
		if fsyncs >= 0 {
			require.Equal(t, fsyncs, f, "%s: fsyncs", what)
		}
	}
}
