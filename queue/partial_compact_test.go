package queue

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// damagedDelayed opens a queue whose 40 delayed messages lie in sealed
// segments, ten to a segment, the 21st (the first of the third segment)
// with a damaged record, and whose log then holds 150 acked messages; it returns the queue and the LSN the log starts at.
func damagedDelayed(t *testing.T) (*Queue, uint64) {
	dir := t.TempDir()
	o := &Options{SegmentSize: 4096, manualCompact: true}
	q, err := Open(dir, o)
	require.NoError(t, err)
	ctx := context.Background()
	for i := range 40 {
		mark := "delayed|"
		if i == 20 {
			mark = "DAMAGED|"
		}
		_, err := q.Enqueue(ctx, []byte(mark+strings.Repeat("d", 340)), WithDelay(time.Hour))
		require.NoError(t, err)
	}
	require.NoError(t, q.Compact())
	require.NoError(t, q.Close())
	segs, err := filepath.Glob(filepath.Join(dir, "log", "0*"))
	require.NoError(t, err)
	for _, s := range segs[:len(segs)-1] {
		if b, err := os.ReadFile(s); err == nil && strings.Contains(string(b), "DAMAGED|") {
			flipMark(t, s, "DAMAGED|")
		}
	}
	q, err = Open(dir, o)
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	for range 150 {
		_, err := q.Enqueue(ctx, []byte(strings.Repeat("g", 300)))
		require.NoError(t, err)
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.Ack())
	}
	return q, q.log.FirstLSN()
}

// The never-delivered messages above a damaged indexed record are not
// copied: that record holds the log from it on anyway.
func TestMoveCopiesCursorRegionOnlyBelowDamage(t *testing.T) {
	q, _ := damagedDelayed(t)
	for range 10 {
		_, err := q.Enqueue(context.Background(), []byte("never|"+strings.Repeat("n", 350)))
		require.NoError(t, err)
	}
	n, err := q.movePinned(q.log.LastLSN()+1, false)
	require.ErrorIs(t, err, ErrCorrupt)
	require.Equal(t, 20, n, "only the delayed messages below the damaged one are copied")
}

// A compaction that stops at a damaged record snapshots again after its
// copies, so the segments below that record are freed.
func TestPartialCompactionFreesTheLogBelowDamage(t *testing.T) {
	q, first := damagedDelayed(t)
	require.ErrorIs(t, q.Compact(), ErrCorrupt)
	require.Equal(t, uint64(20), q.Stats().Moved)
	require.Greater(t, q.log.FirstLSN(), first, "the log below the damaged record is kept")
}
