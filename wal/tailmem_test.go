package wal_test

import (
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/walq/walq/wal"
)

// TestReaderInStepReadsNoFile: a Reader that reads each record right after
// it is written takes it from the committer's copy of the tail in memory,
// not from the file, across many rolls (where that copy's storage passes
// to the next tail): only the entry that seals a segment is read from the
// file (a sealed segment has no copy in memory). Every record reads back
// intact.
func TestReaderInStepReadsNoFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		sync wal.SyncMode
	}{{"SyncNever", wal.SyncNever}, {"SyncAlways", wal.SyncAlways}} {
		t.Run(tc.name, func(t *testing.T) {
			fs := &readCountingFS{}
			l := openLog(t, t.TempDir(), &wal.Options{Sync: tc.sync, SegmentSize: 16 << 10, FS: fs})
			defer closeLog(t, l)
			r := l.NewReader(1)
			defer r.Close()
			const n = 2000
			for i := range uint64(n) {
				lsn, c, err := l.AppendWaiting(selfChecking(i), false)
				if err == nil {
					err = c.Wait()
				}
				if err != nil {
					t.Fatal(err)
				}
				got, rec, err := r.Next()
				if err != nil || got != lsn || !validSelfChecking(rec) {
					t.Fatalf("Next after LSN %d: LSN %d, valid %v, %v", lsn, got, validSelfChecking(rec), err)
				}
			}
			rolls := len(l.Segments()) - 1
			if rolls < 10 {
				t.Fatalf("%d rolls, want at least 10", rolls)
			}
			if reads := fs.reads.Load(); reads > int64(rolls) {
				t.Errorf("a Reader in step with the writes read the files %d times in %d rolls, want at most one per roll", reads, rolls)
			}
		})
	}
}

// TestReadersTailConcurrentWriters: Readers that spin on the tail while
// writers append and the log rolls every few writes read every record
// once, in order and intact (run it under -race: the Readers copy the
// tail's bytes in memory while the committer appends after them, and a
// roll hands that memory to the next tail).
func TestReadersTailConcurrentWriters(t *testing.T) {
	const writers, perWriter, readers = 8, 400, 3
	l := openLog(t, t.TempDir(), &wal.Options{Sync: wal.SyncNever, SegmentSize: 8 << 10})
	defer closeLog(t, l)
	var wg sync.WaitGroup
	var written atomic.Int64
	for w := range uint64(writers) {
		spawn(&wg, func() {
			for i := range uint64(perWriter) {
				_, c, err := l.AppendWaiting(selfChecking(w<<32|i), false)
				if err == nil {
					err = c.Wait()
				}
				if err != nil {
					t.Error(err)
					return
				}
				written.Add(1)
			}
		})
	}
	var rg sync.WaitGroup
	for range readers {
		spawn(&rg, func() {
			r := l.NewReader(1)
			defer r.Close()
			var prev wal.LSN
			for prev < writers*perWriter {
				lsn, rec, err := r.Next()
				if errors.Is(err, io.EOF) {
					runtime.Gosched()
					continue
				}
				if err != nil || lsn != prev+1 || !validSelfChecking(rec) {
					t.Errorf("reader: LSN %d after %d, valid %v, %v", lsn, prev, validSelfChecking(rec), err)
					return
				}
				prev = lsn
			}
		})
	}
	wg.Wait()
	rg.Wait()
	if n := written.Load(); n != writers*perWriter {
		t.Fatalf("%d records written, want %d", n, writers*perWriter)
	}
}

// readCountingFS is the real file system, counting reads of segment files.
type readCountingFS struct {
	wal.OSFS
	reads atomic.Int64
}

func (f *readCountingFS) Open(name string) (wal.File, error) {
	file, err := f.OSFS.Open(name)
	if err != nil {
		return nil, err
	}
	return readCountingFile{File: file, fs: f}, nil
}

type readCountingFile struct {
	wal.File
	fs *readCountingFS
}

func (f readCountingFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.reads.Add(1)
	return f.File.ReadAt(p, off)
}
