package queue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// What becomes of a message a delivery cannot read: it is leased all the
// same and named by the error, so the caller can dead-letter it at once;
// left alone, it comes back at the end of its lease and is dead-lettered
// at MaxDeliveries. The dead-letter set then still lists every letter,
// the unreadable ones without their payload.
func TestDamagedMessageFate(t *testing.T) {
	clock := newFakeClock()
	o := queue.Options{SegmentSize: 4096, MaxDeliveries: 3, ManualRequeue: true, Clock: clock, AckTimeout: time.Minute}
	testhook.SetManualCompaction(&o)
	dir := t.TempDir()
	q := open(t, dir, &o)
	defer q.Close()
	ctx := context.Background()
	pad := string(bytes.Repeat([]byte("p"), 600))
	broken := enqueue(t, q, "BROKEN|"+pad)
	for i := range 7 {
		enqueue(t, q, fmt.Sprint("f", i, "|", pad)) // fill the first segment
	}
	require.Len(t, segments(t, dir), 2, "the damaged message's segment is sealed")
	a := enqueue(t, q, "A|"+pad)
	healthy := enqueue(t, q, "H|"+pad)
	for range 9 {
		require.NoError(t, tryDequeue(t, q).Nack(time.Hour))
	}
	m := tryDequeue(t, q)
	require.Equal(t, healthy, m.ID)
	require.NoError(t, m.DeadLetter("bad input"))
	corruptSegment(t, segments(t, dir)[0], []byte("BROKEN"))
	clock.Advance(2 * time.Hour)
	before := q.Stats()

	ms, err := q.DequeueBatch(ctx, 10)
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.NotEmpty(t, ms, "the readable messages come with the error")
	require.Equal(t, a, ms[len(ms)-1].ID)
	unreadable := 9 - len(ms)
	st := q.Stats()
	require.EqualValues(t, 9, st.InFlight, "the unreadable messages are leased too")
	require.Equal(t, before.Delivered+9, st.Delivered)
	var re *queue.ReadError
	require.True(t, errors.As(err, &re), "%v", err)
	require.Equal(t, broken, re.ID, "the error names the first message it could not read")
	require.NotZero(t, re.Seq)
	require.Contains(t, err.Error(), broken)
	require.NoError(t, ms.Ack())
	require.NoError(t, q.DeadLetterID(re.ID, "unreadable"), "named, it can be dead-lettered at once")

	// The others come back at the end of their lease, and go dead at
	// MaxDeliveries without a consumer getting them.
	for round := 0; ; round++ {
		require.Less(t, round, 4, "the unreadable messages go dead at MaxDeliveries")
		clock.Advance(2 * time.Minute)
		_, err := q.RequeueExpired()
		require.NoError(t, err)
		if q.Stats().Dead == int64(unreadable)+1 {
			break
		}
		ms, err := q.DequeueBatch(ctx, 10)
		require.ErrorIs(t, err, queue.ErrCorrupt, "round %d", round)
		require.Empty(t, ms, "round %d", round)
	}
	st = q.Stats()
	require.EqualValues(t, unreadable+1, st.Dead)
	require.Zero(t, st.InFlight)
	require.Zero(t, st.Ready)

	dead, err := q.DeadLetters(0, 0)
	require.NoError(t, err, "damaged letters do not hide the others")
	require.Len(t, dead, unreadable+1)
	for _, d := range dead {
		if d.ID == healthy {
			require.Equal(t, "H|"+pad, string(d.Payload))
			require.Equal(t, "bad input", d.Reason)
			continue
		}
		require.Nil(t, d.Payload, "%s: no payload from bad bytes", d.ID)
		require.NotEmpty(t, d.ID)
		require.Contains(t, d.Reason, "; corrupt record: ", "%s is told unreadable", d.ID)
		require.Positive(t, strings.Index(d.Reason, "; corrupt record: "), "%s keeps its reason first: %s", d.ID, d.Reason)
		if d.ID == broken {
			require.True(t, strings.HasPrefix(d.Reason, "unreadable; "), d.Reason)
		}
	}
	page, err := q.DeadLetters(0, 2)
	require.NoError(t, err)
	require.Len(t, page, 2)
	require.NoError(t, q.PurgeDead(broken), "a listed damaged letter can be purged by id")
}

// A Pull that cannot read a key's value names the batch: its key, the
// value's seq and the batch's receipt, so the caller can dead-letter it.
func TestPullReadErrorNamesBatch(t *testing.T) {
	o := queue.SortedOptions{CacheBytes: -1, Options: queue.Options{SegmentSize: 4096, ManualRequeue: true}}
	testhook.SetManualCompaction(&o.Options)
	dir := t.TempDir()
	s, err := queue.OpenSorted[int64](dir, &o)
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	pad := string(bytes.Repeat([]byte("p"), 600))
	require.NoError(t, s.Publish(ctx, 1, "broken", []byte("BROKEN|"+pad)))
	for i := range 7 {
		require.NoError(t, s.Publish(ctx, int64(100+i), fmt.Sprint("f", i), []byte(fmt.Sprintf("f%d|%s", i, pad))))
	}
	require.Len(t, segments(t, dir), 2)
	require.NoError(t, s.Publish(ctx, 2, "a", []byte("A|"+pad)))
	corruptSegment(t, segments(t, dir)[0], []byte("BROKEN"))

	bs, err := s.Pull(ctx, 100)
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.NotEmpty(t, bs)
	require.Equal(t, "a", bs[0].Key, "a sorts before the fillers, in the sound segment")
	var re *queue.ReadError
	require.True(t, errors.As(err, &re), "%v", err)
	require.Equal(t, "broken", re.Key)
	require.Equal(t, uint64(1), re.Seq, "the first publish")
	require.Contains(t, err.Error(), `"broken"`)
	require.NoError(t, s.DeadLetter(re.Receipt, "unreadable"))
	require.Equal(t, 1, s.Stats().SortedDead)
}
