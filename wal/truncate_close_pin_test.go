package wal_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/walq/walq/wal"
)

// handleFS is a closeGateFS that counts the read-only handles open on
// each path and remembers a second Close of a handle.
type handleFS struct {
	*closeGateFS

	mu      sync.Mutex
	open    map[string]int // read-only handles open per path
	doubles []string       // paths whose handle was closed twice
}

func (h *handleFS) Open(name string) (wal.File, error) {
	f, err := h.closeGateFS.Open(name)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.open[name]++
	h.mu.Unlock()
	return &countedFile{File: f, h: h, name: name}, nil
}

// openHandles returns how many read-only handles are open.
func (h *handleFS) openHandles() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.open {
		n += c
	}
	return n
}

// countedFile is a read-only handle of a handleFS.
type countedFile struct {
	wal.File
	h      *handleFS
	name   string // the path it was opened with
	closed bool   // guarded by h.mu
}

func (f *countedFile) Close() error {
	err := f.File.Close()
	f.h.mu.Lock()
	if f.closed {
		f.h.doubles = append(f.h.doubles, f.name)
	} else {
		f.closed = true
		f.h.open[f.name]--
	}
	f.h.mu.Unlock()
	return err
}

// TestTruncateFrontClosesRemovedFilesOnce: a truncation closes each
// removed segment's file once, before TruncateFront returns and before a
// Close that races it returns, except the file a Reader pins, which stays
// open and readable until the Reader lets go.
func TestTruncateFrontClosesRemovedFilesOnce(t *testing.T) {
	h := &handleFS{closeGateFS: newCloseGateFS(), open: map[string]int{}}
	l := openLog(t, t.TempDir(), &wal.Options{SegmentSize: 4 << 10, Sync: wal.SyncNever, FS: h})
	first := l.FirstLSN()
	segs := fillSegments(t, l, 4)
	r := l.NewReader(first)
	defer r.Close()
	if _, _, err := r.Next(); err != nil { // pins the first segment's file
		t.Fatal(err)
	}
	g := h.closeGateFS
	defer g.release() // a failure below must not leave the truncation held
	res := truncateHeld(t, l, g, segs[len(segs)-2].FirstLSN, "the close of an unpinned removed segment")
	// The Reader still reads the rest of its removed segment meanwhile.
	read := make(chan error, 1)
	go func() { read <- readRemoved(r, first, segs[1].FirstLSN) }()
	select {
	case err := <-read:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		g.release() // the Reader, blocked by the held close, can go on
		<-read
		t.Fatal("Reader in a removed segment blocked for 10 s by the close of another removed segment")
	}
	closed := make(chan int, 1)
	go func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
		closed <- h.openHandles()
	}()
	// Close waits for the held close of a removed segment: returning
	// within 50 ms is a failure (a slower early return the count below
	// catches).
	select {
	case n := <-closed:
		t.Fatalf("Close returned with %d read-only handles open while a removed segment's close was held", n)
	case <-time.After(50 * time.Millisecond):
	}
	g.release()
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if n := <-closed; n != 1 {
		t.Fatalf("%d read-only handles open when Close returned, want 1 (the Reader's)", n)
	}
	r.Close()
	if n := h.openHandles(); n != 0 {
		t.Fatalf("%d read-only handles open after the Reader closed", n)
	}
	if len(h.doubles) != 0 {
		t.Fatalf("closed twice: %v", h.doubles)
	}
}

// readRemoved reads with r, positioned at first+1, the records up to end
// (excluded), which appendN wrote from record 1 on, and returns the first
// that is not the one written.
func readRemoved(r *wal.Reader, first, end wal.LSN) error {
	for lsn := first + 1; lsn < end; lsn++ {
		got, rec, err := r.Next()
		if err != nil || got != lsn || !bytes.Equal(rec, record(int(lsn-first))) {
			return fmt.Errorf("reader in a removed segment: LSN %d (want %d), %q, %v", got, lsn, rec, err)
		}
	}
	return nil
}
