package queue_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// fakeClock is a Clock that moves only when the test advances it.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{at: c.now.Add(d), ch: ch})
	return ch
}

// Advance moves the clock and fires the timers that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}

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
func crashImage(t *testing.T, src string) string {
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
