package queue_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

func seqs(ms []queue.MessageInfo) []uint64 {
	out := make([]uint64, len(ms))
	for i, m := range ms {
		out[i] = m.Seq
	}
	return out
}

func TestBrowseListsEveryStateWithoutChangingIt(t *testing.T) {
	clock := newFakeClock()
	q := open(t, t.TempDir(), &queue.Options{Clock: clock, ManualRequeue: true})
	defer q.Close()
	for _, p := range []string{"a", "b", "c", "d", "e"} {
		enqueue(t, q, p, queue.WithHeaders(map[string]string{"p": p}))
	}
	_, err := q.Enqueue(context.Background(), []byte("later"), queue.WithDelay(time.Hour))
	require.NoError(t, err)
	a := tryDequeue(t, q)
	b := tryDequeue(t, q)
	require.NoError(t, b.DeadLetter("broken"))
	c := tryDequeue(t, q)
	require.NoError(t, c.Nack(0)) // ready again, from the index
	before := q.Stats()

	ready, err := q.Browse(queue.StateReady, 0, 10)
	require.NoError(t, err)
	require.Len(t, ready, 3, "c (nacked), d and e (never delivered)")
	assert.Equal(t, c.Receipt.Seq, ready[0].Seq)
	assert.Equal(t, 1, ready[0].Deliveries)
	assert.Equal(t, 0, ready[1].Deliveries)
	page, err := q.Browse(queue.StateReady, ready[0].Seq+1, 1)
	require.NoError(t, err)
	assert.Equal(t, seqs(ready[1:2]), seqs(page), "paged by sequence")

	inflight, err := q.Browse(queue.StateInFlight, 0, 10)
	require.NoError(t, err)
	require.Len(t, inflight, 1)
	assert.Equal(t, a.ID, inflight[0].ID)
	assert.Equal(t, a.DeliveredAt.Add(30*time.Second), inflight[0].Due)

	dead, err := q.Browse(queue.StateDead, 0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	assert.Equal(t, "broken", dead[0].Reason)
	delayed, err := q.Browse(queue.StateDelayed, 0, 10)
	require.NoError(t, err)
	require.Len(t, delayed, 1)

	for _, m := range []queue.MessageInfo{ready[2], dead[0], inflight[0]} {
		got, err := q.Peek(m.Seq)
		require.NoError(t, err)
		assert.Equal(t, m.ID, got.ID)
		assert.Equal(t, string(got.Payload), got.Headers["p"])
	}
	_, err = q.Peek(a.Receipt.Lease)
	assert.ErrorIs(t, err, queue.ErrNotFound, "a lease record is no message")
	after := q.Stats()
	assert.Equal(t, before.LastLSN, after.LastLSN, "browsing writes nothing")
	assert.Equal(t, before.Ready, after.Ready)
}

func TestSortedKeysInKeyOrder(t *testing.T) {
	s, err := queue.OpenSorted[int64](t.TempDir(), nil)
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	for _, v := range []struct {
		sort int64
		key  string
	}{{5, "b"}, {3, "a"}, {9, "b"}, {1, "c"}, {2, "b"}} {
		require.NoError(t, s.Publish(ctx, v.sort, v.key, []byte("x")))
	}
	keys, err := s.Keys("", 2)
	require.NoError(t, err)
	require.Len(t, keys, 2)
	assert.Equal(t, "a", keys[0].Key)
	assert.Equal(t, "b", keys[1].Key)
	assert.Equal(t, 3, keys[1].Values)
	assert.Equal(t, int64(2), keys[1].First)
	rest, err := s.Keys("b", 10)
	require.NoError(t, err)
	require.Len(t, rest, 1)
	assert.Equal(t, "c", rest[0].Key)
}

func TestParseMessageState(t *testing.T) {
	for _, st := range []queue.MessageState{queue.StateReady, queue.StateDelayed, queue.StateInFlight, queue.StateDead} {
		got, err := queue.ParseMessageState(st.String())
		require.NoError(t, err)
		assert.Equal(t, st, got)
	}
	_, err := queue.ParseMessageState("leased")
	assert.ErrorIs(t, err, queue.ErrInvalidOptions)
}

// Peek of a never-delivered message whose record is damaged fails with
// ErrCorrupt, as a delivery and Browse do, not with ErrNotFound: the
// message is there, its bytes are not readable. A sequence past the log
// is still not found.
func TestPeekDamagedPendingMessage(t *testing.T) {
	dir := t.TempDir()
	o := &queue.Options{SegmentSize: 4096, ManualRequeue: true}
	q := open(t, dir, o)
	pad := strings.Repeat("p", 600)
	enqueue(t, q, "BROKEN|"+pad)
	for i := range 7 {
		enqueue(t, q, fmt.Sprint("f", i, "|", pad)) // fill the first segment
	}
	require.Greater(t, len(segments(t, dir)), 1, "the damaged message's segment is sealed")
	info, err := q.Browse(queue.StateReady, 0, 1)
	require.NoError(t, err)
	broken := info[0].Seq
	require.NoError(t, q.Close()) // its snapshot covers the log: Open reads none of it
	corruptSegment(t, segments(t, dir)[0], []byte("BROKEN"))

	q = open(t, dir, o)
	defer q.Close()
	_, err = q.Browse(queue.StateReady, 0, 10)
	require.ErrorIs(t, err, queue.ErrCorrupt, "Browse")
	_, err = q.Peek(broken)
	require.ErrorIs(t, err, queue.ErrCorrupt, "Peek")
	_, err = q.Peek(q.Stats().LastLSN + 100)
	require.ErrorIs(t, err, queue.ErrNotFound, "past the log")
}

// Keys refuses a limit that is not positive, as Browse does, on sorted
// and windowed queues alike: 0 returned no key and a negative limit all
// of them, so a caller that passed a page size by mistake got either.
func TestKeysRefusesBadLimit(t *testing.T) {
	s, err := queue.OpenSorted[int64](t.TempDir(), nil)
	require.NoError(t, err)
	defer s.Close()
	w, err := queue.OpenWindowed(t.TempDir(), &queue.WindowOptions{Window: time.Hour})
	require.NoError(t, err)
	defer w.Close()
	ctx := context.Background()
	require.NoError(t, s.Publish(ctx, 1, "a", []byte("x")))
	require.NoError(t, w.Publish(ctx, "a", []byte("x")))
	for _, limit := range []int{0, -1} {
		ks, err := s.Keys("", limit)
		require.ErrorIs(t, err, queue.ErrInvalidOptions, "sorted, limit %d: %v", limit, ks)
		wks, err := w.Keys("", limit)
		require.ErrorIs(t, err, queue.ErrInvalidOptions, "windowed, limit %d: %v", limit, wks)
	}
}
