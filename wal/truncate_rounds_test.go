package wal

import (
	"bytes"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
)

// TestTruncateFrontRounds truncates the front many times while a reader
// reads the newest and oldest records: every record read is the one
// written at its LSN, every truncation leaves tidwall/wal's list of
// segments equal to the Log's (also when only the tail is kept), the
// process holds no more files after the rounds than after the first, and
// the log reads back whole after a reopen. 300 rounds, 100 under the race
// detector, the reader beside them all the while.
func TestTruncateFrontRounds(t *testing.T) {
	const segSize = 8 << 10
	dir := t.TempDir()
	opts := &Options{Sync: SyncNever, SegmentSize: segSize}
	l, err := open(dir, opts, faults{})
	if err != nil {
		t.Fatal(err)
	}
	var written atomic.Int64 // records appended and waited for
	write := func(n int) {
		t.Helper()
		for range n {
			i := int(written.Load())
			_, c, err := l.AppendWaiting(recordOf(i), false)
			if err == nil {
				err = c.Wait()
			}
			if err != nil {
				t.Fatal(err)
			}
			written.Add(1)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readErr atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, lsn := range []LSN{LSN(written.Load()), l.FirstLSN()} {
				if lsn == 0 {
					continue
				}
				got, err := l.Read(lsn)
				if errors.Is(err, ErrNotFound) {
					continue // truncated meanwhile
				}
				if err != nil || !bytes.Equal(got, recordOf(int(lsn-1))) {
					readErr.Store(errors.New("Read(" + string(got[:min(len(got), 16)]) + "...) at a truncation: " + errString(err)))
					return
				}
			}
		}
	}()
	fds := 0
	rounds := 300
	if raceEnabled {
		rounds = 100
	}
	for round := range rounds {
		write(3 * segSize / 1000)
		segs := l.Segments()
		target := segs[len(segs)-2].FirstLSN
		if round%2 == 1 && segs[len(segs)-1].FirstLSN != 0 {
			target = segs[len(segs)-1].FirstLSN // all but the tail
		}
		if err := l.TruncateFront(target); err != nil {
			t.Fatal(err)
		}
		checkStoreList(t, l)
		if round == 0 {
			fds = openFiles(t)
		}
	}
	close(stop)
	wg.Wait()
	if err, _ := readErr.Load().(error); err != nil {
		t.Fatal(err)
	}
	if n := openFiles(t); n > fds {
		t.Errorf("%d open files after the rounds, %d after the first", n, fds)
	}
	reopenReadsBack(t, l, dir, opts, l.FirstLSN(), LSN(written.Load()))
}

func errString(err error) string {
	if err == nil {
		return "wrong bytes"
	}
	return err.Error()
}

// openFiles counts the process's open file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
