package wal

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSealedIndexDroppedAndRebuilt: a segment sealed by this process drops
// its sparse index (a backlog read in order needs none), and a lookup in it
// rebuilds the index and finds every record.
func TestSealedIndexDroppedAndRebuilt(t *testing.T) {
	l, err := Open(t.TempDir(), &Options{SegmentSize: 64 << 10, Sync: SyncNever})
	require.NoError(t, err)
	defer l.Close()
	const n = 3000
	for i := range n {
		_, c, err := l.Append(fmt.Appendf(nil, "record %05d %0100d", i, i))
		require.NoError(t, err)
		if i%100 == 99 {
			require.NoError(t, c.Wait())
		}
	}
	require.NoError(t, l.Flush())
	l.seg.RLock()
	segs := append([]*segment(nil), l.seg.list...)
	l.seg.RUnlock()
	require.Greater(t, len(segs), 3)
	for _, s := range segs[:len(segs)-1] {
		require.True(t, s.sealed)
		require.False(t, s.indexed, "sealed segment %s keeps no index", s.path)
		require.Nil(t, s.points)
	}
	for i := n; i >= 1; i -= 7 { // backwards: no read-ahead helps
		rec, err := l.Read(LSN(i))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("record %05d %0100d", i-1, i-1), string(rec))
	}
	l.seg.RLock()
	defer l.seg.RUnlock()
	for _, s := range segs[:len(segs)-1] {
		require.True(t, s.indexed, "segment %s indexed by the lookups", s.path)
		require.NotEmpty(t, s.points)
	}
}
