package queue_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestSortedLeasedBatchDoesNotPinLog holds one sorted batch leased (an
// hour's lease, extended on the way, as a slow consumer does) while
// thousands of values pass through other keys, with compaction left to
// the queue. The log must stay within the documented bound (twice the
// live bytes plus two segments, and a segment more for a pass in flight):
// the batch's values are copied forward like the pending ones, not left to
// pin every segment written since the pull. The batch must then come back
// whole after a crash and after a clean Close whose lease runs out, and
// its ack must still work.
func TestSortedLeasedBatchDoesNotPinLog(t *testing.T) {
	clock := newFakeClock()
	const seg = 16 << 10
	dir := t.TempDir()
	o := &queue.SortedOptions{Options: queue.Options{SegmentSize: seg, Sync: queue.SyncNever, AckTimeout: time.Hour, Clock: clock}}
	s, err := queue.OpenSorted[int64](dir, o)
	require.NoError(t, err)
	defer func() { s.Close() }()
	ctx := context.Background()
	leased := []string{"leased 1 " + strings.Repeat("l", 300), "leased 2 " + strings.Repeat("m", 300)}
	for _, p := range leased {
		require.NoError(t, s.Publish(ctx, -1, "L", []byte(p)))
	}
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.Equal(t, "L", bs[0].Key)
	held := bs[0]
	for i := range 200 {
		require.NoError(t, s.Publish(ctx, 1e9, fmt.Sprint("p", i), []byte(strings.Repeat("x", 200))))
	}
	for i := range 3000 {
		require.NoError(t, s.Publish(ctx, 0, "c", []byte(strings.Repeat("c", 200))))
		bs, err := s.TryPull(1)
		require.NoError(t, err)
		require.Equal(t, "c", bs[0].Key)
		require.NoError(t, bs[0].Ack())
		if i%1000 == 999 {
			clock.Advance(time.Minute)
			require.NoError(t, held.Extend(time.Hour))
		}
	}
	require.NoError(t, s.Compact())
	st := s.Stats()
	t.Logf("log %d bytes, live %d, %d segments, %d moved", st.LogBytes, st.LiveBytes, len(st.Segments), st.Moved)
	require.LessOrEqual(t, st.LogBytes, 2*st.LiveBytes+3*seg,
		"a leased batch pins the log: %d bytes for %d live bytes", st.LogBytes, st.LiveBytes)

	// A crash: the batch comes back, its values read from their copies.
	img := crashImage(t, dir)
	crashed, err := queue.OpenSorted[int64](img, o)
	require.NoError(t, err)
	requireBatch(t, crashed, leased)
	require.NoError(t, crashed.Close())

	// A clean Close keeps the lease; once it runs out the batch comes back.
	require.NoError(t, s.Close())
	s, err = queue.OpenSorted[int64](dir, o)
	require.NoError(t, err)
	clock.Advance(2 * time.Hour)
	_, err = s.RequeueExpired()
	require.NoError(t, err)
	requireBatch(t, s, leased)
}

// requireBatch pulls the first key and requires it to be L with the
// payloads want, and acks it.
func requireBatch(t *testing.T, s *queue.Sorted[int64], want []string) {
	t.Helper()
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.Equal(t, "L", bs[0].Key)
	require.Equal(t, want, payloads(bs[0]))
	require.NoError(t, bs[0].Ack())
}

// TestCompactBesideLeasedDamagedValue: a pull met a damaged value, whose
// batch stays leased (a ReadError names it). A compaction meanwhile
// leaves that value where it is, copies forward the values below it and
// reports the damage, which holds the log from there.
func TestCompactBesideLeasedDamagedValue(t *testing.T) {
	o := queue.SortedOptions{CacheBytes: -1,
		Options: queue.Options{SegmentSize: 4096, ManualRequeue: true, AckTimeout: time.Hour}}
	testhook.SetManualCompaction(&o.Options)
	dir := t.TempDir()
	s, err := queue.OpenSorted[int64](dir, &o)
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	pad := strings.Repeat("p", 600)
	churn := func(n int) {
		t.Helper()
		for range n {
			require.NoError(t, s.Publish(ctx, 0, "c", []byte("c|"+pad)))
			bs, err := s.TryPull(1)
			require.NoError(t, err)
			require.NoError(t, bs[0].Ack())
		}
	}
	require.NoError(t, s.Publish(ctx, 2, "kept", []byte("kept|"+pad)))
	require.NoError(t, s.Publish(ctx, 1, "broken", []byte("BROKEN|"+pad)))
	churn(4)
	require.Greater(t, len(segments(t, dir)), 1, "the damaged value's segment is sealed")
	corruptSegment(t, segments(t, dir)[0], []byte("BROKEN"))
	bs, err := s.TryPull(1)
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.Empty(t, bs)
	require.Equal(t, 1, s.Stats().SortedBatches, "the damaged batch stays leased")
	churn(100) // the log grows over its bound: the compaction copies forward
	moved := s.Stats().Moved
	require.ErrorIs(t, s.Compact(), queue.ErrCorrupt, "the damage left behind is reported")
	require.Greater(t, s.Stats().Moved, moved, "the compaction copied the values below it forward")
	require.Equal(t, 1, s.Stats().SortedBatches)
}
