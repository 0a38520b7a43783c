package queue_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// handoverFS is the real file system which, while watching, tries before
// each change made through it (a file opened for writing, a write, a
// truncation, an fsync, a rename, a remove, a file closed, an append or
// front cut of tidwall/wal's) to open dir for writing, as a process
// waiting on Options.LockTimeout does the instant the directory's lock
// is free. It notes each change before which that Open got the lock.
type handoverFS struct {
	wal.OSFS
	dir      string                    // the queue directory the probes open
	open     func() (io.Closer, error) // opens dir for writing as its kind of queue; nil: queue.Open
	before   func(op string)           // called before each change, watching or not; nil: none. Set before use
	watching atomic.Bool               // probes are made only while set
	mu       sync.Mutex                // guards probes and intruded
	probes   int                       // Opens tried while watching
	intruded []string                  // the changes before which an Open was not refused with ErrLocked
}

// watch starts or stops the probes.
func (f *handoverFS) watch(on bool) { f.watching.Store(on) }

// probe tries a writing Open of dir before the change op, if watching.
// An Open that succeeds is closed again at once.
func (f *handoverFS) probe(op string) {
	if f.before != nil {
		f.before(op)
	}
	if !f.watching.Load() {
		return
	}
	open := f.open
	if open == nil {
		open = func() (io.Closer, error) { return queue.Open(f.dir, nil) }
	}
	q, err := open()
	if err == nil {
		err = errors.Join(errors.New("opened"), q.Close())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.probes++
	if !errors.Is(err, queue.ErrLocked) {
		f.intruded = append(f.intruded, fmt.Sprintf("%s: %v", op, err))
	}
}

// requireHeld fails t unless probes were made and every one was refused
// with ErrLocked.
func (f *handoverFS) requireHeld(t *testing.T, what string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotZero(t, f.probes, "%s made no change through the FS: nothing was checked", what)
	require.Empty(t, f.intruded, "a writer opened the directory while %s still changed it (of %d tries)", what, f.probes)
}

func (f *handoverFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		f.probe("open for writing " + filepath.Base(name))
	}
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return handoverFile{file, f, filepath.Base(name)}, nil
}

func (f *handoverFS) Open(name string) (wal.File, error) {
	file, err := f.OSFS.Open(name)
	if err != nil {
		return nil, err
	}
	return handoverFile{file, f, filepath.Base(name)}, nil
}

func (f *handoverFS) Rename(oldpath, newpath string) error {
	f.probe("rename " + filepath.Base(oldpath) + " to " + filepath.Base(newpath))
	return f.OSFS.Rename(oldpath, newpath)
}

func (f *handoverFS) Remove(name string) error {
	f.probe("remove " + filepath.Base(name))
	return f.OSFS.Remove(name)
}

func (f *handoverFS) SyncDir(name string) error {
	f.probe("fsync directory " + filepath.Base(name))
	return f.OSFS.SyncDir(name)
}

// StoreOp is told of each write tidwall/wal makes with package os.
func (f *handoverFS) StoreOp(op string) error {
	f.probe(op)
	return nil
}

// handoverFile probes before each change to the file.
type handoverFile struct {
	wal.File
	fs   *handoverFS
	name string // the file's base name
}

func (h handoverFile) Write(p []byte) (int, error) {
	h.fs.probe("write " + h.name)
	return h.File.Write(p)
}

func (h handoverFile) WriteAt(p []byte, off int64) (int, error) {
	h.fs.probe("write " + h.name)
	return h.File.WriteAt(p, off)
}

func (h handoverFile) Truncate(size int64) error {
	h.fs.probe("truncate " + h.name)
	return h.File.Truncate(size)
}

func (h handoverFile) Sync() error {
	h.fs.probe("fsync " + h.name)
	return h.File.Sync()
}

func (h handoverFile) Datasync() error {
	h.fs.probe("fdatasync " + h.name)
	return h.File.Datasync()
}

func (h handoverFile) Close() error {
	h.fs.probe("close " + h.name)
	return h.File.Close()
}

// TestCloseHoldsTheLockToTheEnd: a process waiting on LockTimeout to take
// a queue over opens it only once the closing one has finished with the
// directory: its final snapshot written, the log cut before it and
// closed. Released any sooner, the new writer would replay a directory
// that the old one still rewrites under it. The same holds for each kind
// of queue, for Repair, and for a read-only handle and Verify, whose
// shared lock keeps writers out while they still have the log's files
// open.
func TestCloseHoldsTheLockToTheEnd(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// run fills a queue in dir through fs, closes it while fs
		// watches, then checks what the next Open finds.
		run func(t *testing.T, dir string, fs *handoverFS)
	}{
		{"ack", func(t *testing.T, dir string, fs *handoverFS) {
			q := open(t, dir, &queue.Options{FS: fs})
			enqueue(t, q, "acked")
			enqueue(t, q, "handed over")
			require.NoError(t, tryDequeue(t, q).Ack())
			fs.watch(true)
			require.NoError(t, q.Close())
			fs.watch(false)
			q = open(t, dir, nil)
			defer q.Close()
			require.Equal(t, "handed over", string(tryDequeue(t, q).Payload))
			requireEmpty(t, q)
		}},
		{"sorted", func(t *testing.T, dir string, fs *handoverFS) {
			s, err := queue.OpenSorted[int](dir, &queue.SortedOptions{Options: queue.Options{FS: fs}})
			require.NoError(t, err)
			require.NoError(t, s.Publish(ctx, 1, "acked", []byte("a")))
			require.NoError(t, s.Publish(ctx, 2, "kept", []byte("k")))
			bs, err := s.TryPull(1)
			require.NoError(t, err)
			require.Len(t, bs, 1)
			require.NoError(t, bs[0].Ack())
			fs.open = func() (io.Closer, error) { return queue.OpenSorted[int](dir, nil) }
			fs.watch(true)
			require.NoError(t, s.Close())
			fs.watch(false)
			s, err = queue.OpenSorted[int](dir, nil)
			require.NoError(t, err)
			defer s.Close()
			bs, err = s.TryPull(10)
			require.NoError(t, err)
			require.Len(t, bs, 1)
			require.Equal(t, "kept", bs[0].Key)
			require.Equal(t, [][]byte{[]byte("k")}, bs[0].Payloads())
		}},
		{"windowed", func(t *testing.T, dir string, fs *handoverFS) {
			opts := &queue.WindowOptions{SortedOptions: queue.SortedOptions{Options: queue.Options{FS: fs}}, Window: time.Nanosecond}
			w, err := queue.OpenWindowed(dir, opts)
			require.NoError(t, err)
			require.NoError(t, w.Publish(ctx, "acked", []byte("a")))
			bs, err := w.Pull(ctx, 1)
			require.NoError(t, err)
			require.Len(t, bs, 1)
			require.NoError(t, bs[0].Ack())
			require.NoError(t, w.Publish(ctx, "kept", []byte("k")))
			fs.open = func() (io.Closer, error) {
				return queue.OpenWindowed(dir, &queue.WindowOptions{Window: time.Nanosecond})
			}
			fs.watch(true)
			require.NoError(t, w.Close())
			fs.watch(false)
			w, err = queue.OpenWindowed(dir, &queue.WindowOptions{Window: time.Nanosecond})
			require.NoError(t, err)
			defer w.Close()
			bs, err = w.Pull(ctx, 10)
			require.NoError(t, err)
			require.Len(t, bs, 1)
			require.Equal(t, "kept", bs[0].Key)
			require.Equal(t, [][]byte{[]byte("k")}, bs[0].Payloads())
		}},
		{"read-only", func(t *testing.T, dir string, fs *handoverFS) {
			q := open(t, dir, nil)
			enqueue(t, q, "kept")
			require.NoError(t, q.Close())
			ro := open(t, dir, &queue.Options{ReadOnly: true, FS: fs})
			require.False(t, ro.InUse())
			fs.watch(true)
			require.NoError(t, ro.Close())
			fs.watch(false)
			q = open(t, dir, nil)
			defer q.Close()
			require.Equal(t, "kept", string(tryDequeue(t, q).Payload))
		}},
		{"verify", func(t *testing.T, dir string, fs *handoverFS) {
			q := open(t, dir, nil)
			enqueue(t, q, "kept")
			require.NoError(t, q.Close())
			fs.watch(true)
			c, err := queue.Verify(dir, &queue.VerifyOptions{FS: fs})
			fs.watch(false)
			require.NoError(t, err)
			require.True(t, c.Clean())
		}},
		{"repair", func(t *testing.T, dir string, fs *handoverFS) {
			q := open(t, dir, nil)
			enqueue(t, q, "kept")
			require.NoError(t, q.Close())
			queue.TornTail(t, dir)
			fs.watch(true)
			rep, err := queue.Repair(dir, &queue.RepairOptions{Options: &queue.Options{FS: fs}})
			fs.watch(false)
			require.NoError(t, err)
			require.True(t, rep.Repaired)
			q = open(t, dir, nil)
			defer q.Close()
			require.Equal(t, "kept", string(tryDequeue(t, q).Payload))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fs := &handoverFS{dir: dir}
			tc.run(t, dir, fs)
			fs.requireHeld(t, tc.name)
		})
	}
}
