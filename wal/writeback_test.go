package wal

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// hintLog records the write-back hints a Log makes, answering each with
// supported and err.
type hintLog struct {
	mu        sync.Mutex
	ranges    [][2]int64 // off, n of each hint, in order
	supported bool
	err       error
}

func (h *hintLog) hint(_ File, off, n int64) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ranges = append(h.ranges, [2]int64{off, n})
	return h.supported, h.err
}

func (h *hintLog) taken() [][2]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][2]int64(nil), h.ranges...)
}

// writeMiB appends mib MiB in 8 KiB records, each waited for; it returns
// the first error.
func writeMiB(l *Log, mib int) error { return writeKiB(l, mib<<10) }

// writeKiB appends kib KiB in 8 KiB records, each waited for; it returns
// the first error.
func writeKiB(l *Log, kib int) error {
	rec := make([]byte, 8<<10)
	for range kib / 8 {
		_, c, err := l.AppendWaiting(rec, false)
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// TestWritebackHintsTail: without fsync per write, the tail's bytes are
// handed to the kernel's write-back as they are written, in ranges of
// writebackBytes or more that follow each other from the segment's start;
// under SyncAlways no hint is made (each write is fsynced at once).
func TestWritebackHintsTail(t *testing.T) {
	for name, mode := range map[string]SyncMode{"never": SyncNever, "interval": SyncInterval, "always": SyncAlways} {
		t.Run(name, func(t *testing.T) {
			h := &hintLog{supported: true}
			l, err := open(t.TempDir(), &Options{Sync: mode, SyncInterval: time.Hour}, faults{writeback: h.hint})
			if err != nil {
				t.Fatal(err)
			}
			if err := writeMiB(l, 3); err != nil {
				t.Fatal(err)
			}
			segs := l.Segments()
			held := segs[len(segs)-1].Bytes
			closeOrFail(t, l)
			ranges := h.taken()
			if mode == SyncAlways {
				if len(ranges) != 0 {
					t.Fatalf("SyncAlways made %d write-back hints: %v; want none", len(ranges), ranges)
				}
				return
			}
			if len(ranges) == 0 {
				t.Fatal("3 MiB written to one segment made no write-back hint")
			}
			end := int64(0)
			for i, r := range ranges {
				if r[0] != end || r[1] < writebackBytes {
					t.Fatalf("hint %d covers [%d, +%d); want it to start at %d with %d bytes at least (all: %v)",
						i, r[0], r[1], end, writebackBytes, ranges)
				}
				end = r[0] + r[1]
			}
			if len(segs) != 1 || end > held {
				t.Fatalf("hints reach byte %d of %d segments, the last holding %d bytes; want one", end, len(segs), held)
			}
		})
	}
}

// TestWritebackUnsupported: a file system that refuses the hint as
// unsupported is asked once, and the Log carries on healthy.
func TestWritebackUnsupported(t *testing.T) {
	h := &hintLog{supported: false}
	l, err := open(t.TempDir(), &Options{Sync: SyncNever}, faults{writeback: h.hint})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeMiB(l, 3); err != nil {
		t.Fatal(err)
	}
	closeOrFail(t, l)
	if n := len(h.taken()); n != 1 {
		t.Fatalf("an unsupported hint was made %d times; want once", n)
	}
}

// TestWritebackFailurePoisons: a hint that fails (an I/O error the kernel
// met queueing the pages) poisons the Log as a failed fsync would: the
// appends after it fail with that error.
func TestWritebackFailurePoisons(t *testing.T) {
	boom := errors.New("EIO")
	h := &hintLog{supported: true, err: boom}
	l, err := open(t.TempDir(), &Options{Sync: SyncNever}, faults{writeback: h.hint})
	if err != nil {
		t.Fatal(err)
	}
	_ = writeMiB(l, 1) // the hint fails in the background, during or after these
	select {
	case <-l.Poisoned():
	case <-time.After(10 * time.Second):
		t.Fatal("a failed write-back hint left the Log healthy")
	}
	if err := writeMiB(l, 1); !errors.Is(err, boom) {
		t.Fatalf("append after a failed hint = %v; want the hint's error", err)
	}
	if err := l.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close = %v; want the hint's error", err)
	}
}

// flushLog records the tail flushes a Log makes, answering each with err.
type flushLog struct {
	mu    sync.Mutex
	paths []string
	err   error
}

func (f *flushLog) flush(_ FS, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paths = append(f.paths, path)
	return f.err
}

func (f *flushLog) taken() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.paths...)
}

// TestFlushBeforeRoll: without fsync per write, each segment is flushed
// once, a quarter of a segment before its roll, by path; under
// SyncAlways none is (each write is fsynced at once).
func TestFlushBeforeRoll(t *testing.T) {
	for name, mode := range map[string]SyncMode{"never": SyncNever, "interval": SyncInterval, "always": SyncAlways} {
		t.Run(name, func(t *testing.T) {
			h, fl := &hintLog{supported: true}, &flushLog{}
			l, err := open(t.TempDir(), &Options{Sync: mode, SyncInterval: time.Hour, SegmentSize: 1 << 20},
				faults{writeback: h.hint, flush: fl.flush})
			if err != nil {
				t.Fatal(err)
			}
			if err := writeMiB(l, 4); err != nil {
				t.Fatal(err)
			}
			var want []string // every segment that reached three quarters of the segment size
			for _, s := range l.Segments() {
				if s.Bytes >= 3<<18 {
					want = append(want, s.Path)
				}
			}
			closeOrFail(t, l)
			got := fl.taken()
			if mode == SyncAlways {
				if len(got) != 0 {
					t.Fatalf("SyncAlways flushed %v; want nothing", got)
				}
				return
			}
			if len(want) < 3 || !slices.Equal(got, want) {
				t.Fatalf("flushed %v; want each segment past three quarters once, in order: %v", got, want)
			}
		})
	}
}

// TestFlushFailurePoisons: a flush that fails poisons the Log: the
// appends after it fail with that error, and so does Close.
func TestFlushFailurePoisons(t *testing.T) {
	boom := errors.New("EIO")
	fl := &flushLog{err: boom}
	l, err := open(t.TempDir(), &Options{Sync: SyncNever, SegmentSize: 1 << 20},
		faults{writeback: (&hintLog{supported: true}).hint, flush: fl.flush})
	if err != nil {
		t.Fatal(err)
	}
	_ = writeMiB(l, 1) // the flush fails in the background, during or after these
	select {
	case <-l.Poisoned():
	case <-time.After(10 * time.Second):
		t.Fatalf("a failed flush (%d made) left the Log healthy", len(fl.taken()))
	}
	if err := writeMiB(l, 1); !errors.Is(err, boom) {
		t.Fatalf("append after a failed flush = %v; want the flush's error", err)
	}
	if err := l.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close = %v; want the flush's error", err)
	}
}

// TestFlushErrorTakenFromFsync: where a write-back error is kept per
// file, not per open file description (Linux before 4.13), the flush's
// failed fdatasync takes it, and the committer's next fsync of its own
// handle succeeds. Nothing that fsync covers counts durable: the committer
// waits for the flush in flight and finds the Log poisoned, whether its
// fsync is a Flush's or a roll's.
func TestFlushErrorTakenFromFsync(t *testing.T) {
	boom := errors.New("EIO")
	for name, after := range map[string]func(l *Log) error{
		"Flush": func(l *Log) error { return l.Flush() },
		"roll":  func(l *Log) error { return writeKiB(l, 256) },
	} {
		t.Run(name, func(t *testing.T) {
			flushing, release := make(chan struct{}), make(chan struct{})
			var started, taken sync.Once
			f := faults{
				writeback: (&hintLog{supported: true}).hint,
				flush: func(FS, string) error { // its fdatasync failed, taking the error
					started.Do(func() { close(flushing) })
					<-release
					return boom
				},
				datasync: func(File) error { // the error is taken: the fsync succeeds
					taken.Do(func() { close(release) })
					return nil
				},
			}
			// 512 KiB segments: the flush, at 384 KiB, is the tail's first job.
			l, err := open(t.TempDir(), &Options{Sync: SyncNever, SegmentSize: 512 << 10}, f)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { // on a failure: a flush blocked stops no Close
				taken.Do(func() { close(release) })
				_ = l.Close()
			})
			if err := writeKiB(l, 400); err != nil {
				t.Fatal(err)
			}
			select {
			case <-flushing:
			case <-time.After(10 * time.Second):
				t.Fatal("no flush past three quarters of the segment")
			}
			durable := l.DurableLSN()
			err = after(l)
			if d := l.DurableLSN(); d != durable {
				t.Fatalf("DurableLSN rose from %d to %d by an fsync whose error the failed flush took", durable, d)
			}
			if !errors.Is(err, boom) {
				t.Fatalf("%s after the failed flush = %v; want the flush's error", name, err)
			}
			if err := l.Close(); !errors.Is(err, boom) {
				t.Fatalf("Close = %v; want the flush's error", err)
			}
		})
	}
}

// TestFlushUnsupportedHints: a file system that refuses the hints is
// still flushed before each roll.
func TestFlushUnsupportedHints(t *testing.T) {
	fl := &flushLog{}
	l, err := open(t.TempDir(), &Options{Sync: SyncNever, SegmentSize: 1 << 20},
		faults{writeback: (&hintLog{supported: false}).hint, flush: fl.flush})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeMiB(l, 3); err != nil {
		t.Fatal(err)
	}
	closeOrFail(t, l)
	if n := len(fl.taken()); n < 2 {
		t.Fatalf("%d flushes for 3 MiB in 1 MiB segments with hints refused; want 2 at least", n)
	}
}

// spyFS is the real file system, recording the Datasync and Close calls
// made on the files it opens read-only.
type spyFS struct {
	OSFS
	mu  sync.Mutex
	ops []string
}

type spyFile struct {
	File
	fs *spyFS
}

func (s *spyFS) Open(name string) (File, error) {
	f, err := s.OSFS.Open(name)
	if err != nil {
		return nil, err
	}
	s.record("open")
	return spyFile{File: f, fs: s}, nil
}

func (s *spyFS) record(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops = append(s.ops, op)
}

func (f spyFile) Datasync() error { f.fs.record("datasync"); return f.File.Datasync() }
func (f spyFile) Close() error    { f.fs.record("close"); return f.File.Close() }

// TestFlushSegment: a flush opens the segment afresh, fdatasyncs that
// handle and closes it, so a write-back error it takes is not taken from
// the handle the committer fsyncs; a segment already removed, or one that
// cannot be opened for a shortage (no fsync made, no error taken), is not
// flushed, and that is no failure; any other failure to open is one.
func TestFlushSegment(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, segmentName(1))
	if err := os.WriteFile(path, []byte("entries"), 0o600); err != nil {
		t.Fatal(err)
	}
	fsys := &spyFS{}
	if err := flushSegment(fsys, path); err != nil {
		t.Fatalf("flush of an existing segment: %v", err)
	}
	if want := []string{"open", "datasync", "close"}; !slices.Equal(fsys.ops, want) {
		t.Fatalf("flush made %v; want %v", fsys.ops, want)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := flushSegment(fsys, path); err != nil {
		t.Fatalf("flush of a removed segment: %v; want nil", err)
	}
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM} {
		err := &fs.PathError{Op: "open", Path: path, Err: errno}
		if err := flushSegment(failOpenFS{err: err}, path); err != nil {
			t.Fatalf("flush whose open failed for a shortage (%v) = %v; want nil: the roll's fsync writes it", errno, err)
		}
	}
	boom := errors.New("boom")
	if err := flushSegment(failOpenFS{err: boom}, path); !errors.Is(err, boom) {
		t.Fatalf("flush whose open failed = %v; want that failure", err)
	}
}

// failOpenFS fails every Open with err.
type failOpenFS struct {
	OSFS
	err error
}

func (f failOpenFS) Open(string) (File, error) { return nil, f.err }
