package wal

import (
	"errors"
	"sync"
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
func writeMiB(l *Log, mib int) error {
	rec := make([]byte, 8<<10)
	for range mib * 128 {
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
