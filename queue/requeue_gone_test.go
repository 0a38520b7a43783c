package queue

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// A requeue reads the letter from the index, then checks its payload
// outside the lock. These tests put the letter in the state that check
// sees when the letter is purged and compacted out of the log in between:
// the requeue must say the letter is not found, not that a read failed.

// TestRequeueDeadGoneBeforeCheck: RequeueDead of a letter gone between
// its lookup and its check fails with ErrNotFound.
func TestRequeueDeadGoneBeforeCheck(t *testing.T) {
	q, err := Open(t.TempDir(), &Options{SegmentSize: 4096, manualCompact: true})
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	_, err = q.Enqueue(ctx, bytes.Repeat([]byte("d"), 1500), WithID("d0"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("pin"))
	e, err := q.deadByID("d0")
	require.NoError(t, err)
	for range 6 {
		_, err := q.Enqueue(ctx, bytes.Repeat([]byte("b"), 3000))
		require.NoError(t, err)
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.Ack())
	}
	require.NoError(t, q.PurgeDead("d0"))
	require.NoError(t, q.Compact())
	err = q.checkDeadReadable(deadRef{seq: e.Seq, loc: e.Loc, id: e.ID})
	require.ErrorIs(t, err, ErrNotFound)
	require.NotErrorIs(t, err, ErrCorrupt)
}

// TestRequeueDeadValueGoneBeforeCheck is the same for a sorted queue's
// RequeueDead and RequeueDeadValue.
func TestRequeueDeadValueGoneBeforeCheck(t *testing.T) {
	s, err := OpenSorted[int64](t.TempDir(), &SortedOptions{
		Options: Options{SegmentSize: 4096, MaxDeliveries: 1, manualCompact: true}, CacheBytes: -1})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, s.Publish(ctx, 1, "dead", bytes.Repeat([]byte("d"), 1500)))
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.NoError(t, bs[0].Nack(0))
	dead, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	d, ok := s.q.deadValue(dead[0].Seq)
	require.True(t, ok)
	for i := range 6 {
		require.NoError(t, s.Publish(ctx, 100, fmt.Sprint("busy", i), bytes.Repeat([]byte("b"), 3000)))
		bs, err := s.TryPull(1)
		require.NoError(t, err)
		require.NoError(t, bs[0].Ack())
	}
	require.NoError(t, s.PurgeDead(d.Seq))
	require.NoError(t, s.Compact())
	err = s.q.checkDeadValueReadable(d)
	require.ErrorIs(t, err, ErrNotFound)
	require.NotErrorIs(t, err, ErrCorrupt)
}
