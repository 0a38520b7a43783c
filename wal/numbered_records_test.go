package wal

import (
	"bytes"
	"fmt"
	"testing"
)

// recordOf is the i-th record the truncation tests write (at LSN i+1):
// about 1000 bytes that say which one it is.
func recordOf(i int) []byte {
	return append([]byte(fmt.Sprintf("record %d ", i)), bytes.Repeat([]byte("r"), 990)...)
}

// appendNumbered appends the n records from recordOf(next) on to l,
// waiting for each, and returns the number of the next one.
func appendNumbered(t *testing.T, l *Log, next, n int) int {
	t.Helper()
	for range n {
		_, c, err := l.AppendWaiting(recordOf(next), false)
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			t.Fatal(err)
		}
		next++
	}
	return next
}

// reopenReadsBack closes l, opens dir again with opts, and requires that
// the reopened log reads recordOf(lsn-1) at each LSN from first through
// last. It returns the reopened log, closed when t ends.
func reopenReadsBack(t *testing.T, l *Log, dir string, opts *Options, first, last LSN) *Log {
	t.Helper()
	closeOrFail(t, l)
	l, err := open(dir, opts, faults{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOrFail(t, l) })
	for lsn := first; lsn <= last; lsn++ {
		if got, err := l.Read(lsn); err != nil || !bytes.Equal(got, recordOf(int(lsn-1))) {
			t.Fatalf("Read(%d) after reopen = %q..., %v", lsn, got[:min(len(got), 16)], err)
		}
	}
	return l
}
