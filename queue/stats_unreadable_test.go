package queue_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// readCountFS is the real file system, except that once armed every batch
// write fails, and it counts the reads of each file by base name.
type readCountFS struct {
	wal.OSFS
	armed atomic.Bool
	mu    sync.Mutex
	reads map[string]int // guarded by mu
}

var errWriteFails = errors.New("batch write failed")

func (f *readCountFS) StoreOp(op string) error {
	if op == wal.StoreWriteBatch && f.armed.Load() {
		return errWriteFails
	}
	return nil
}

func (f *readCountFS) Open(name string) (wal.File, error) {
	return f.OpenFile(name, os.O_RDONLY, 0)
}

func (f *readCountFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &countedFile{File: file, fs: f, name: filepath.Base(name)}, nil
}

// readsOf returns how many reads were made of the file named name.
func (f *readCountFS) readsOf(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads[filepath.Base(name)]
}

type countedFile struct {
	wal.File
	fs   *readCountFS
	name string
}

func (c *countedFile) ReadAt(p []byte, off int64) (int, error) {
	c.fs.mu.Lock()
	if c.fs.reads == nil {
		c.fs.reads = map[string]int{}
	}
	c.fs.reads[c.name]++
	c.fs.mu.Unlock()
	return c.File.ReadAt(p, off)
}

// readBackHandler is a log handler that counts the records saying that a
// poisoned log could not be read back, and reads the queue's Stats for
// each of them.
type readBackHandler struct {
	statsHandler
	failed atomic.Int64
}

func (h *readBackHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "could not be read back") {
		h.failed.Add(1)
		return h.statsHandler.Handle(ctx, r)
	}
	return nil
}
func (h *readBackHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *readBackHandler) WithGroup(string) slog.Handler      { return h }

// A poisoned log whose segment was damaged after it was written cannot be
// read back for Stats. Stats says so in CountsErr (with ErrCorrupt, as a
// reopen would fail), counts what the calls left, the enqueue whose write
// failed included, logs the failure once (to a handler that may call
// Stats) and reads the log back once: no later call, nor Close, nor Stats
// after Close reads the damaged segment again.
func TestStatsOfUnreadablePoisonedLog(t *testing.T) {
	dir, fs, h := t.TempDir(), &readCountFS{}, &readBackHandler{}
	q := open(t, dir, &queue.Options{FS: fs, ManualRequeue: true, SegmentSize: 4096, Sync: queue.SyncNever,
		Logger: slog.New(h)})
	h.q.Store(q)
	items := make([]queue.Item, 30)
	for i := range items {
		items[i].Payload = bytes.Repeat([]byte("x"), 100)
	}
	const batches = 40
	for range batches {
		_, err := q.EnqueueBatch(context.Background(), items)
		require.NoError(t, err)
	}
	require.NoError(t, q.Stats().CountsErr, "a healthy log")
	fs.armed.Store(true)
	_, err := q.Enqueue(context.Background(), []byte("its write fails"))
	require.ErrorIs(t, err, errWriteFails)

	segs := segments(t, dir)
	require.Greater(t, len(segs), 10)
	victim := segs[len(segs)/2] // sealed, far from the tail the log keeps in memory
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	b[len(b)/2] ^= 0xff
	require.NoError(t, os.WriteFile(victim, b, 0o600))

	stats := make(chan queue.Stats, 1)
	go func() { stats <- q.Stats() }()
	var first queue.Stats
	select {
	case first = <-stats:
	case <-time.After(10 * time.Second):
		t.Fatal("Stats hangs: the log handler it called could not read Stats")
	}
	require.ErrorIs(t, first.CountsErr, queue.ErrCorrupt)
	require.EqualValues(t, batches*len(items)+1, first.Ready, "the calls' counts")
	read := fs.readsOf(victim)
	require.NotZero(t, read, "the read back did not reach the damaged segment")

	for range 5 {
		s := q.Stats()
		require.Equal(t, first.CountsErr, s.CountsErr)
		require.Equal(t, first.Ready, s.Ready)
	}
	require.Error(t, q.Close())
	closed := q.Stats()
	require.True(t, closed.Closed)
	require.Equal(t, first.CountsErr, closed.CountsErr)
	require.Equal(t, read, fs.readsOf(victim), "the log was read back again")
	require.Equal(t, int64(1), h.failed.Load(), "the failure is logged once")
}
