package queue_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/queue"
)

// newFakeClock returns a clock that moves only when the test advances it.
func newFakeClock() *fakeclock.Clock { return fakeclock.New() }

func open(t *testing.T, dir string, o *queue.Options) *queue.Queue {
	t.Helper()
	q, err := queue.Open(dir, o)
	require.NoError(t, err)
	return q
}

func enqueue(t *testing.T, q *queue.Queue, payload string, opts ...queue.EnqueueOption) string {
	t.Helper()
	id, err := q.Enqueue(context.Background(), []byte(payload), opts...)
	require.NoError(t, err)
	return id
}

func tryDequeue(t *testing.T, q *queue.Queue) *queue.Message {
	t.Helper()
	m, err := q.TryDequeue()
	require.NoError(t, err)
	return m
}

func requireEmpty(t *testing.T, q *queue.Queue) {
	t.Helper()
	_, err := q.TryDequeue()
	require.ErrorIs(t, err, queue.ErrEmpty)
}

// crashImage copies the queue directory as it is on disk right now (what a
// kill -9 leaves: everything written, synced or not) to a new directory,
// without the lock, and returns it.
func crashImage(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		return copyFile(path, target)
	})
	require.NoError(t, err)
	return dst
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// segments returns the log segment files of a queue directory, oldest first.
func segments(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "log", "0*"))
	require.NoError(t, err)
	return m
}

func ncpu() int { return runtime.GOMAXPROCS(0) }

// ackUnderWindow enqueues id in the queue at dir under a one-hour dedup
// window, acks it, and closes the queue: the id is then acked and kept.
func ackUnderWindow(t *testing.T, clk *fakeclock.Clock, dir, id string) {
	t.Helper()
	q := open(t, dir, &queue.Options{Clock: clk, DedupWindow: time.Hour})
	enqueue(t, q, "a", queue.WithID(id))
	require.NoError(t, tryDequeue(t, q).Ack())
	require.NoError(t, q.Close())
}
