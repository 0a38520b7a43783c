package wal

import (
	"bytes"
	"reflect"
	"testing"
)

// TestReserveTail pins what reserveTail assumes about tidwall/wal's
// layout: the copy of the tail segment it keeps in memory stays small
// while the segment does, and has its room once the segment holds
// reserveAfter bytes after Open; at a roll the new tail takes over the
// sealed segment's copy, with its room, and the entries' positions get
// room too; after TruncateFront reopens tidwall/wal, the tail's new copy
// takes over the old one's storage. Every record reads back intact.
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
	room := func(when string, reserved bool) {
		t.Helper()
		l.c.mu.Lock()
		defer l.c.mu.Unlock()
		c := tailCopyCap(t, l.c.st.(*tidwallStore))
		if reserved && c < tailRoom(segSize) {
			t.Errorf("%s: the tail's copy has room for %d bytes, want %d", when, c, tailRoom(segSize))
		}
		if !reserved && c >= tailRoom(segSize) {
			t.Errorf("%s: the tail's copy has room for %d bytes before the segment holds %d", when, c, reserveAfter(segSize))
		}
	}
	// past reserveAfter, counting the records and the frames around them
	past := reserveAfter(segSize)/len(rec) + 2
	write(1)
	room("after one record", false)
	write(past)
	room("after Open", true)
	for range 3 {
		rolls := len(l.Segments())
		before := tailStorage(t, l)
		for len(l.Segments()) == rolls {
			write(1)
		}
		room("just after a roll", true)
		if after := tailStorage(t, l); after != before {
			t.Errorf("after a roll the tail's copy is at %#x, want the sealed segment's %#x", after, before)
		}
		if n := tailCap(t, l, "epos"); n < segSize/len(rec) {
			t.Errorf("after a roll the tail's positions have room for %d entries, want %d", n, segSize/len(rec))
		}
	}
	write(past)
	room("after rolls", true)
	before := tailStorage(t, l)
	if err := l.TruncateFront(l.Segments()[1].FirstLSN); err != nil {
		t.Fatal(err)
	}
	room("just after TruncateFront", true)
	if after := tailStorage(t, l); after != before {
		t.Errorf("after TruncateFront the tail's copy is at %#x, want the one before at %#x", after, before)
	}
	write(past)
	room("after TruncateFront", true)
	for _, lsn := range lsns[len(lsns)-segSize/len(rec):] {
		if got, err := l.Read(lsn); err != nil || !bytes.Equal(got, rec) {
			t.Fatalf("Read(%d) = %d bytes, %v", lsn, len(got), err)
		}
	}
}

// tailStorage returns the address of the storage of tidwall/wal's copy
// of the tail segment.
func tailStorage(t *testing.T, l *Log) uintptr {
	t.Helper()
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	return tailField(t, l.c.st.(*tidwallStore), "ebuf").Pointer()
}

// tailCopyCap returns the capacity of tidwall/wal's copy of the tail
// segment.
func tailCopyCap(t *testing.T, s *tidwallStore) int {
	t.Helper()
	return tailField(t, s, "ebuf").Cap()
}

// tailField returns a field of tidwall/wal's tail segment.
func tailField(t *testing.T, s *tidwallStore, name string) reflect.Value {
	t.Helper()
	segs := reflect.ValueOf(s.tw).Elem().FieldByName("segments")
	if !segs.IsValid() || segs.Len() == 0 {
		t.Fatal("tidwall/wal has no segments field, or no segment")
	}
	f := segs.Index(segs.Len() - 1).Elem().FieldByName(name)
	if !f.IsValid() {
		t.Fatalf("tidwall/wal's segment has no %s field", name)
	}
	return f
}
