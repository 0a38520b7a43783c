package wal_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/walq/walq/wal"
)

// TestReadersThroughTruncations: Readers that stream the log from its
// front while one goroutine appends (rolling a segment every few dozen
// records) and another cuts the front behind the writer as fast as it
// can read only the records written at each LSN, in order, each pass
// ending at io.EOF or, when the cut overtook it, ErrNotFound; never
// another error, never a record of a newer segment whose file got the
// descriptor number a removed one had. Once the Readers and the Log are
// closed, the process holds as many files as before the Log was opened:
// no removed segment's handle is left open (counted through the FS as
// well, since a leaked handle's finalizer may close its descriptor),
// none is closed twice or while a Reader still reads it.
func TestReadersThroughTruncations(t *testing.T) {
	for _, mode := range syncModes[:1] { // SyncNever: an fsync per record would slow the race down, not add to it
		t.Run(mode.name, func(t *testing.T) {
			before := openFDs(t)
			h := &handleFS{closeGateFS: newCloseGateFS(), open: map[string]int{}} // counts handles: a leaked os.File's finalizer may close its descriptor
			l := openLog(t, t.TempDir(), &wal.Options{SegmentSize: 4 << 10, Sync: mode.sync, FS: h})
			records := raceScaled(1500, 2)
			var written atomic.Uint64 // the last LSN appended and waited for
			errs := make(chan error, 8)
			done := make(chan struct{})
			more := make(chan struct{}, 1) // the writer appended another ten records
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // the writer: record(lsn-1) at each LSN
				defer wg.Done()
				defer close(done)
				for i := range records {
					lsn, c, err := l.Append(record(i))
					if err == nil {
						err = c.Wait()
					}
					if err == nil && lsn != wal.LSN(i+1) {
						err = fmt.Errorf("record %d appended at LSN %d", i, lsn)
					}
					if err != nil {
						errs <- err
						return
					}
					written.Store(uint64(lsn))
					if lsn%10 == 0 {
						select {
						case more <- struct{}{}:
						default:
						}
					}
				}
			}()
			wg.Add(1)
			go func() { // the truncator: the front cut to 40 records behind the writer
				defer wg.Done()
				for !isDone(done) {
					select {
					case <-more:
					case <-done:
						return
					}
					if w := written.Load(); w > 40 {
						if err := l.TruncateFront(wal.LSN(w - 40)); err != nil {
							errs <- fmt.Errorf("TruncateFront(%d): %w", w-40, err)
							return
						}
					}
				}
			}()
			passes := make([]int, 3)
			for n := range passes {
				wg.Add(1)
				go func() { // a reader: passes from the front to the end
					defer wg.Done()
					for !isDone(done) {
						if err := readPass(l); err != nil {
							errs <- err
							return
						}
						passes[n]++
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			closeLog(t, l)
			if n := h.openHandles(); n != 0 || len(h.doubles) != 0 {
				t.Fatalf("%d segment handles left open, closed twice: %v", n, h.doubles)
			}
			if after := openFDs(t); after != before {
				t.Fatalf("%d files open before the Log was opened, %d once it and its Readers were closed", before, after)
			}
			t.Logf("%d records, reader passes %v", records, passes)
		})
	}
}

// readPass reads l with a Reader from its first LSN until io.EOF or
// ErrNotFound and checks each record; it closes the Reader.
func readPass(l *wal.Log) error {
	first := l.FirstLSN()
	r := l.NewReader(first)
	defer r.Close()
	want := first
	for {
		lsn, rec, err := r.Next()
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, wal.ErrNotFound):
			return nil
		case err != nil:
			return fmt.Errorf("Reader from %d: Next after LSN %d: %w", first, want-1, err)
		case lsn != want && want != first:
			return fmt.Errorf("Reader from %d: LSN %d after %d", first, lsn, want-1)
		case !bytes.Equal(rec, record(int(lsn)-1)):
			return fmt.Errorf("Reader from %d: LSN %d holds %.24q, want %.24q", first, lsn, rec, record(int(lsn)-1))
		}
		want = lsn + 1
	}
}

// isDone reports whether ch is closed.
func isDone(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
