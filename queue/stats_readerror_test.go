package queue_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// readErrorFS fails every batch write once armed (the poison), and fails
// the next failReads reads with EIO, then reads as the disk does.
type readErrorFS struct {
	wal.OSFS
	armed     atomic.Bool
	failReads atomic.Int64
}

func (f *readErrorFS) StoreOp(op string) error {
	if op == wal.StoreWriteBatch && f.armed.Load() {
		return errWriteFails
	}
	return nil
}

func (f *readErrorFS) Open(name string) (wal.File, error) { return f.OpenFile(name, os.O_RDONLY, 0) }

func (f *readErrorFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &readErrorFile{File: file, fs: f}, nil
}

type readErrorFile struct {
	wal.File
	fs *readErrorFS
}

func (c *readErrorFile) ReadAt(p []byte, off int64) (int, error) {
	if c.fs.failReads.Add(-1) >= 0 {
		return 0, syscall.EIO
	}
	return c.File.ReadAt(p, off)
}

// poisonedWithReadErrors fills a queue with 1200 messages, poisons its log
// with an enqueue whose write fails, and makes the next failReads reads
// fail with EIO. The queue is closed when the test ends.
func poisonedWithReadErrors(t *testing.T, failReads int64) (*queue.Queue, *readErrorFS) {
	fs := &readErrorFS{}
	q := open(t, t.TempDir(), &queue.Options{FS: fs, ManualRequeue: true, SegmentSize: 4096, Sync: queue.SyncNever})
	t.Cleanup(func() { require.ErrorIs(t, q.Close(), errWriteFails, "Close returns the poison") })
	items := make([]queue.Item, 30)
	for i := range items {
		items[i].Payload = bytes.Repeat([]byte("x"), 100)
	}
	for range 40 {
		_, err := q.EnqueueBatch(context.Background(), items)
		require.NoError(t, err)
	}
	fs.armed.Store(true)
	_, err := q.Enqueue(context.Background(), []byte("its write fails"))
	require.Error(t, err)
	fs.failReads.Store(failReads)
	return q, fs
}

// TestStatsOfPoisonedLogAfterOneReadError: a read error while Stats reads
// a poisoned log back is tried again at the next call (it was kept for
// good, so every later Stats counted the enqueue whose write failed).
func TestStatsOfPoisonedLogAfterOneReadError(t *testing.T) {
	q, _ := poisonedWithReadErrors(t, 1)
	first := q.Stats()
	require.Error(t, first.CountsErr, "the read back met an EIO")
	require.False(t, errors.Is(first.CountsErr, queue.ErrCorrupt), "an EIO is not damage")
	second := q.Stats()
	require.NoError(t, second.CountsErr, "the log reads again: Stats must read it back")
	require.EqualValues(t, 1200, second.Ready, "the log as written holds 1200 messages")
}

// TestStatsOfPoisonedLogReadErrorsBounded: a read error that stays is
// tried three times in all, then kept: a later call does not read the log
// back though it has become readable.
func TestStatsOfPoisonedLogReadErrorsBounded(t *testing.T) {
	q, fs := poisonedWithReadErrors(t, 1<<40)
	for i := range 3 {
		require.Error(t, q.Stats().CountsErr, "call %d", i)
	}
	fs.failReads.Store(0)
	for range 3 {
		st := q.Stats()
		require.Error(t, st.CountsErr, "the read back was tried again after three failures")
		require.EqualValues(t, 1201, st.Ready, "the calls' counts, the failed enqueue included")
	}
}
