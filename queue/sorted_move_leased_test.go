package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSortedPullFollowsLeasedCopy: between a pull and the read of its
// payloads (made without the lock), a compaction copies the batch's
// values forward and cuts the log behind them. The read must follow the
// copies and deliver the payloads, not fail with a ReadError.
func TestSortedPullFollowsLeasedCopy(t *testing.T) {
	o := Options{SegmentSize: 4096, Sync: SyncNever, AckTimeout: time.Hour, manualCompact: true}
	s, err := OpenSorted[int64](t.TempDir(), &SortedOptions{CacheBytes: -1, Options: o})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	want := []string{"first " + strings.Repeat("a", 200), "second " + strings.Repeat("b", 200)}
	for _, p := range want {
		require.NoError(t, s.Publish(ctx, 5, "L", []byte(p)))
	}
	for range 100 { // values pulled before L's and acked: the log grows past L's records
		require.NoError(t, s.Publish(ctx, 0, "c", []byte(strings.Repeat("c", 200))))
		bs, err := s.TryPull(1)
		require.NoError(t, err)
		require.NoError(t, bs[0].Ack())
	}
	q := s.q
	q.mu.Lock()
	pulled, c, err := q.pullLocked(1, nil)
	q.mu.Unlock()
	require.NoError(t, err)
	require.NoError(t, waitWritten(c))
	require.Len(t, pulled, 1)
	old := pulled[0].Values[0].Loc

	q.mu.Lock()
	target := q.moveTargetLocked()
	q.mu.Unlock()
	moved, err := q.movePinned(target, false)
	require.NoError(t, err)
	require.Equal(t, 2, moved, "the leased batch's values are copied forward")
	require.NoError(t, q.snapshot())
	require.Greater(t, q.log.FirstLSN(), old, "the log is cut past the values' publish records")

	b, err := s.batch(pulled[0])
	require.NoError(t, err)
	require.Equal(t, want, payloadsOf(b))
	require.NoError(t, b.Ack())
}

func payloadsOf(b *Batch[int64]) []string {
	var out []string
	for _, p := range b.Payloads() {
		out = append(out, string(p))
	}
	return out
}
