package wal

import (
	"bytes"
	"reflect"
	"testing"
)

// TestReserveTail pins what reserveTail assumes about tidwall/wal's
// layout: the copy of the tail segment it keeps in memory has the room
// reserved once a batch is written, after Open, after a roll and after
// TruncateFront reopens it, and every record reads back intact.
func TestReserveTail(t *testing.T) {
	const segSize = 64 << 10
	l, err := open(t.TempDir(), &Options{Sync: SyncNever, SegmentSize: segSize}, faults{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeOrFail(t, l)
	rec := bytes.Repeat([]byte("r"), 1000)
	var lsns []LSN
	write := func(n int) {
		t.Helper()
		for range n {
			lsn, c, err := l.AppendWaiting(rec, false)
			if err == nil {
				err = c.Wait()
			}
			if err != nil {
				t.Fatal(err)
			}
			lsns = append(lsns, lsn)
		}
	}
	room := func(when string) {
		t.Helper()
		l.c.mu.Lock()
		defer l.c.mu.Unlock()
		if c := tailCopyCap(t, l.c.st.(*tidwallStore)); c < tailRoom(segSize) {
			t.Errorf("%s: the tail's copy has room for %d bytes, want %d", when, c, tailRoom(segSize))
		}
	}
	write(1)
	room("after Open")
	write(3 * segSize / len(rec))
	room("after rolls")
	if len(l.Segments()) < 3 {
		t.Fatalf("%d segments, want rolls", len(l.Segments()))
	}
	if err := l.TruncateFront(l.Segments()[1].FirstLSN); err != nil {
		t.Fatal(err)
	}
	write(1)
	room("after TruncateFront")
	for _, lsn := range lsns[len(lsns)-segSize/len(rec):] {
		if got, err := l.Read(lsn); err != nil || !bytes.Equal(got, rec) {
			t.Fatalf("Read(%d) = %d bytes, %v", lsn, len(got), err)
		}
	}
}

// tailCopyCap returns the capacity of tidwall/wal's copy of the tail
// segment.
func tailCopyCap(t *testing.T, s *tidwallStore) int {
	t.Helper()
	segs := reflect.ValueOf(s.tw).Elem().FieldByName("segments")
	if !segs.IsValid() || segs.Len() == 0 {
		t.Fatal("tidwall/wal has no segments field, or no segment")
	}
	ebuf := segs.Index(segs.Len() - 1).Elem().FieldByName("ebuf")
	if !ebuf.IsValid() {
		t.Fatal("tidwall/wal's segment has no ebuf field")
	}
	return ebuf.Cap()
}
