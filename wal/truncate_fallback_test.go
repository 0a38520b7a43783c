package wal

import "testing"

// TestTruncateFrontFallback runs truncateFront's fallback, which reopens
// tidwall/wal, as the committer would run it for a tidwall/wal whose list
// of segments segmentList does not find: the log then keeps writing,
// rolling and truncating (the usual way), with tidwall/wal's list equal to
// the Log's, and reads back whole after a reopen. Under SyncAlways the
// tail is extended with zeros ahead of its written end, which the
// reopened tidwall/wal would read as entries of its own: the fallback
// cuts them first (cutBeforeReopen).
func TestTruncateFrontFallback(t *testing.T) {
	t.Run("SyncNever", func(t *testing.T) { truncateFrontFallback(t, SyncNever) })
	t.Run("SyncAlways", func(t *testing.T) { truncateFrontFallback(t, SyncAlways) })
}

func truncateFrontFallback(t *testing.T, sync SyncMode) {
	const segSize = 16 << 10
	dir := t.TempDir()
	opts := &Options{Sync: sync, SegmentSize: segSize}
	l, err := open(dir, opts, faults{})
	if err != nil {
		t.Fatal(err)
	}
	next := 0
	for round := range 4 {
		next = appendNumbered(t, l, next, 4*segSize/1000)
		segs := l.Segments()
		lsn := segs[len(segs)-2].FirstLSN
		if round%2 == 1 {
			if err := l.TruncateFront(lsn); err != nil {
				t.Fatal(err)
			}
		} else {
			reopenTruncate(t, l, lsn)
		}
		checkStoreList(t, l)
	}
	next = appendNumbered(t, l, next, segSize/1000)
	first := l.FirstLSN()
	l = reopenReadsBack(t, l, dir, opts, first, LSN(next))
	if got := l.FirstLSN(); got != first {
		t.Fatalf("FirstLSN after reopen %d, want %d", got, first)
	}
}

// reopenTruncate is committer.truncateFront(lsn) with the store's
// fallback, reopenFront, in place of its truncateFront.
func reopenTruncate(t *testing.T, l *Log, lsn LSN) {
	t.Helper()
	c := l.c
	c.mu.Lock()
	defer c.mu.Unlock()
	target, i := l.truncateTarget(lsn)
	if i == 0 {
		t.Fatalf("nothing to truncate below LSN %d", lsn)
	}
	c.unpublishTail()
	if err := c.st.(*tidwallStore).reopenFront(target.firstIndex); err != nil {
		t.Fatal(err)
	}
	l.dropFront(i)
}
