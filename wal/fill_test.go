package wal

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// TestLaggingReaderCopiesOnce: a Reader that stays some tens of KiB behind
// the writes (less than memReadMax) takes what each write added from the
// tail's copy in memory, not its whole lag again at every entry: over
// 2,000 writes it copies about as many bytes as the log holds. Every
// record reads back intact, in order.
func TestLaggingReaderCopiesOnce(t *testing.T) {
	l, err := open(t.TempDir(), &Options{Sync: SyncNever}, faults{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeOrFail(t, l)
	next := uint64(0)
	write := func() {
		t.Helper()
		rec := make([]byte, 100)
		binary.LittleEndian.PutUint64(rec, next)
		next++
		_, c, err := l.AppendWaiting(rec, false)
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for range 300 { // a lag of about 36 KiB
		write()
	}
	r := l.NewReader(1)
	defer r.Close()
	var copied int64
	off, n := r.sr.off, r.sr.n
	for i := range uint64(2000) {
		write()
		lsn, rec, err := r.Next()
		if err != nil || lsn != LSN(i+1) || len(rec) != 100 || binary.LittleEndian.Uint64(rec) != i {
			t.Fatalf("Next = LSN %d, %d bytes, %v; want LSN %d, record %d", lsn, len(rec), err, i+1, i)
		}
		switch {
		case r.sr.off != off:
			copied += int64(r.sr.n)
		case r.sr.n > n:
			copied += int64(r.sr.n - n)
		}
		off, n = r.sr.off, r.sr.n
	}
	held := l.Segments()[len(l.Segments())-1].Bytes
	if copied > 2*held {
		t.Errorf("a Reader about 36 KiB behind copied %d bytes while the log grew to %d; want at most twice that", copied, held)
	}
}

// TestReserveBounded: the storage a tail's copy keeps stays within twice
// what a tail needs, whatever came before: a copy regrown by an entry
// larger than the room is not handed to the next tails; the positions of
// a tail that starts in the middle of a batch are reserved for what the
// sealed segment held, not for what its first small entry suggests; and
// a TruncateFront after a reopen leaves a small tail's copy small.
func TestReserveBounded(t *testing.T) {
	const segSize = 64 << 10
	small := bytes.Repeat([]byte("s"), 100)
	t.Run("large entry", func(t *testing.T) {
		l := openBounded(t, t.TempDir(), segSize)
		defer closeOrFail(t, l)
		done := commitWaiter(t)
		done(l.AppendAll([][]byte{bytes.Repeat([]byte("L"), 8<<20)}, false))
		for range 3 {
			rolls := len(l.Segments())
			for len(l.Segments()) == rolls {
				done(l.AppendWaiting(small, false))
			}
			if c := tailCap(t, l, "ebuf"); c > 2*tailRoom(segSize) {
				t.Errorf("after a roll the tail's copy keeps %d bytes, want at most %d", c, 2*tailRoom(segSize))
			}
		}
	})
	t.Run("positions after a roll mid-batch", func(t *testing.T) {
		l := openBounded(t, t.TempDir(), segSize)
		defer closeOrFail(t, l)
		done := commitWaiter(t)
		rec := bytes.Repeat([]byte("r"), 1000)
		before := tailLen(t, l)
		done(l.AppendWaiting(rec, false))
		entry := tailLen(t, l) - before
		for tailLen(t, l)+entry < segSize {
			done(l.AppendWaiting(rec, false))
		}
		// Two groups in one batch: the first seals the segment, the
		// second starts the next one.
		rolls := len(l.Segments())
		if _, _, err := l.AppendWaiting(rec, false); err != nil {
			t.Fatal(err)
		}
		done(l.AppendWaiting(small, false))
		if len(l.Segments()) != rolls+1 {
			t.Fatalf("%d segments after the batch, want %d", len(l.Segments()), rolls+1)
		}
		full := segSize / entry
		if c := tailCap(t, l, "epos"); c > 4*full {
			t.Errorf("the new tail's positions have room for %d entries; a full segment holds %d", c, full)
		}
	})
	t.Run("TruncateFront after a reopen", func(t *testing.T) {
		dir := t.TempDir()
		l := openBounded(t, dir, segSize)
		done := commitWaiter(t)
		for len(l.Segments()) < 3 {
			done(l.AppendWaiting(small, false))
		}
		closeOrFail(t, l)
		l = openBounded(t, dir, segSize)
		defer closeOrFail(t, l)
		done(l.AppendWaiting(small, false))
		segs := l.Segments()
		if err := l.TruncateFront(segs[len(segs)-1].FirstLSN); err != nil {
			t.Fatal(err)
		}
		if n, c := tailLen(t, l), tailCap(t, l, "ebuf"); c >= tailRoom(segSize) {
			t.Errorf("a tail of %d bytes has a copy of %d bytes after TruncateFront; it gets its room at %d", n, c, reserveAfter(segSize))
		}
	})
}

func openBounded(t *testing.T, dir string, segSize int64) *Log {
	t.Helper()
	l, err := open(dir, &Options{Sync: SyncNever, SegmentSize: segSize, MaxGroupBytes: 1020}, faults{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// commitWaiter returns a function that waits for an append's Commit.
func commitWaiter(t *testing.T) func(LSN, *Commit, error) {
	return func(_ LSN, c *Commit, err error) {
		t.Helper()
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// tailLen and tailCap are the length of tidwall/wal's copy of the tail
// segment and the capacity of its field name, read under the committer's
// lock.
func tailLen(t *testing.T, l *Log) int {
	t.Helper()
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	return tailField(t, l.c.st.(*tidwallStore), "ebuf").Len()
}

func tailCap(t *testing.T, l *Log, name string) int {
	t.Helper()
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	return tailField(t, l.c.st.(*tidwallStore), name).Cap()
}
