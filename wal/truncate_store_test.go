package wal

import "testing"

// TestTruncateFrontKeepsStore pins what the store's truncateFront assumes
// about tidwall/wal's list of segments: TruncateFront drops the front
// segments from it without reopening tidwall/wal (which would read the
// whole tail back from its file), tidwall/wal's first index and list then
// match the Log's, the tail's copy in memory is the one before, and the
// log keeps writing, rolling and truncating, and reads back intact after a
// reopen.
func TestTruncateFrontKeepsStore(t *testing.T) {
	const segSize = 64 << 10
	dir := t.TempDir()
	opts := &Options{Sync: SyncNever, SegmentSize: segSize}
	l, err := open(dir, opts, faults{})
	if err != nil {
		t.Fatal(err)
	}
	next := 0
	for round := range 3 {
		next = appendNumbered(t, l, next, 5*segSize/1000) // about five segments
		st := l.c.st.(*tidwallStore)
		tw, before := st.tw, tailStorage(t, l)
		segs := l.Segments()
		if err := l.TruncateFront(segs[len(segs)-2].FirstLSN); err != nil {
			t.Fatal(err)
		}
		if st.tw != tw {
			t.Fatalf("round %d: TruncateFront reopened tidwall/wal", round)
		}
		if after := tailStorage(t, l); after != before {
			t.Errorf("round %d: the tail's copy moved from %#x to %#x", round, before, after)
		}
		checkStoreList(t, l)
	}
	reopenReadsBack(t, l, dir, opts, l.FirstLSN(), LSN(next))
}

// checkStoreList checks that tidwall/wal's first index and segments are
// the Log's.
func checkStoreList(t *testing.T, l *Log) {
	t.Helper()
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	first, err := l.c.st.firstIndex()
	if err != nil {
		t.Fatal(err)
	}
	l.seg.RLock()
	defer l.seg.RUnlock()
	if want := l.seg.list[0].firstIndex; first != want {
		t.Errorf("tidwall/wal's first index is %d, the Log's first segment's %d", first, want)
	}
	list := findSegmentList(l.c.st.(*tidwallStore).tw)
	if !list.segs.IsValid() {
		t.Fatal("tidwall/wal's segment list is not laid out as segmentList expects: TruncateFront reopens it")
	}
	if n := list.segs.Len(); n != len(l.seg.list) {
		t.Fatalf("tidwall/wal lists %d segments, the Log %d", n, len(l.seg.list))
	}
	for i, s := range l.seg.list {
		if got := list.segs.Index(i).Elem().FieldByName("index").Uint(); got != s.firstIndex {
			t.Errorf("segment %d: tidwall/wal's starts at index %d, the Log's at %d", i, got, s.firstIndex)
		}
	}
}
