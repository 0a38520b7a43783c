package queue_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// corruptSegment changes one byte of the first occurrence of mark in the
// log segment seg, as a bad sector would.
func corruptSegment(t *testing.T, seg string, mark []byte) {
	t.Helper()
	b, err := os.ReadFile(seg)
	require.NoError(t, err)
	i := bytes.Index(b, mark)
	require.GreaterOrEqual(t, i, 0, "%q not in %s", mark, seg)
	f, err := os.OpenFile(seg, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{b[i] ^ 0x20}, int64(i))
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// A DequeueBatch that meets a damaged payload leased the other messages
// of the batch too, and lost them: the call failed with ErrCorrupt and
// returned nothing, so each of them counted a delivery that no consumer
// got, came back at its lease's end beside the damaged one, and was
// dead-lettered after MaxDeliveries such calls without being processed.
// The call now returns the messages it could read, with the error.
func TestBatchBesideDamagedPayload(t *testing.T) {
	clock := newFakeClock()
	o := queue.Options{SegmentSize: 4096, MaxDeliveries: 3, ManualRequeue: true, Clock: clock, AckTimeout: time.Minute}
	testhook.SetManualCompaction(&o)
	dir := t.TempDir()
	q := open(t, dir, &o)
	defer q.Close()
	pad := string(bytes.Repeat([]byte("p"), 600))
	enqueue(t, q, "BROKEN|"+pad)
	fillers := map[string]string{} // id -> token
	for i := range 7 {
		tok := fmt.Sprint("f", i)
		fillers[enqueue(t, q, tok+"|"+pad)] = tok // fill the first segment
	}
	require.Len(t, segments(t, dir), 2, "the damaged message's segment is sealed")
	want := map[string]string{} // id -> token
	for _, tok := range []string{"A", "B"} {
		want[enqueue(t, q, tok+"|"+pad)] = tok
	}
	// Every message is delivered once and given back for an hour, so the
	// next deliveries read their payloads from the log, oldest first.
	for range 10 {
		require.NoError(t, tryDequeue(t, q).Nack(time.Hour))
	}
	corruptSegment(t, segments(t, dir)[0], []byte("BROKEN"))
	clock.Advance(2 * time.Hour)

	// Every batch has the damaged message, and maybe fillers that its
	// segment's damage keeps from being read; A and B come with them.
	got := map[string]string{}
	for round := 0; len(got) < 2 && round < 6; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ms, err := q.DequeueBatch(ctx, 10)
		cancel()
		if round == 0 {
			require.ErrorIs(t, err, queue.ErrCorrupt, "the first batch meets BROKEN")
			require.NotEmpty(t, ms, "and returns the messages it could read with the error")
		}
		for _, m := range ms {
			tok, rest, _ := strings.Cut(string(m.Payload), "|")
			require.Equal(t, pad, rest, "the payload of %s", tok)
			require.Equal(t, cmp.Or(want[m.ID], fillers[m.ID]), tok, "message %s carries its own payload", m.ID)
			if want[m.ID] != "" {
				got[m.ID] = tok
			}
			require.NoError(t, m.Ack())
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			require.True(t, errors.Is(err, queue.ErrCorrupt), "%v", err)
		}
		clock.Advance(2 * time.Minute)
		_, err = q.RequeueExpired()
		require.NoError(t, err)
	}
	require.Equal(t, want, got, "A and B are delivered, whole, beside the damage")
}

// The sorted queue's Pull had the same flaw: a key whose value could not
// be read failed the call, and the other keys it had leased were lost
// with it, a delivery older each time, until they went dead unseen.
func TestPullBesideDamagedPayload(t *testing.T) {
	clock := newFakeClock()
	o := queue.SortedOptions{CacheBytes: -1, // every payload is read from the log
		Options: queue.Options{SegmentSize: 4096, MaxDeliveries: 3, ManualRequeue: true, Clock: clock, AckTimeout: time.Minute}}
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
	require.Len(t, segments(t, dir), 2, "the damaged value's segment is sealed")
	require.NoError(t, s.Publish(ctx, 2, "a", []byte("A|"+pad)))
	require.NoError(t, s.Publish(ctx, 3, "b", []byte("B|"+pad)))
	corruptSegment(t, segments(t, dir)[0], []byte("BROKEN"))

	got := map[string]bool{}
	for round := 0; len(got) < 2 && round < 6; round++ {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		bs, err := s.Pull(ctx, 100)
		cancel()
		if round == 0 {
			require.ErrorIs(t, err, queue.ErrCorrupt, "the first pull meets BROKEN")
			require.NotEmpty(t, bs, "and returns the batches it could read with the error")
		}
		for _, b := range bs {
			require.Len(t, b.Values, 1)
			tok, rest, _ := strings.Cut(string(b.Values[0].Payload), "|")
			require.Equal(t, pad, rest, "the payload of %s", b.Key)
			require.Equal(t, strings.ToLower(tok), b.Key, "key %s carries its own value", b.Key)
			if b.Key == "a" || b.Key == "b" {
				got[b.Key] = true
			}
			require.NoError(t, b.Ack())
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			require.True(t, errors.Is(err, queue.ErrCorrupt), "%v", err)
		}
		clock.Advance(2 * time.Minute)
		_, err = s.RequeueExpired()
		require.NoError(t, err)
	}
	require.Equal(t, map[string]bool{"a": true, "b": true}, got, "a and b are pulled, whole, beside the damage")
}

// Typed.DequeueBatch passes on the messages Queue.DequeueBatch returns
// beside a damaged one, decoded.
func TestTypedBatchBesideDamagedPayload(t *testing.T) {
	clock := newFakeClock()
	o := queue.Options{SegmentSize: 4096, ManualRequeue: true, Clock: clock, AckTimeout: time.Minute}
	testhook.SetManualCompaction(&o)
	dir := t.TempDir()
	q := open(t, dir, &o)
	defer q.Close()
	tq := queue.NewTyped[string](q)
	ctx := context.Background()
	pad := string(bytes.Repeat([]byte("p"), 600))
	for _, v := range []string{"BROKEN", "f0", "f1", "f2", "f3", "f4", "f5", "f6"} {
		_, err := tq.Enqueue(ctx, v+"|"+pad)
		require.NoError(t, err)
	}
	require.Len(t, segments(t, dir), 2)
	_, err := tq.Enqueue(ctx, "A|"+pad)
	require.NoError(t, err)
	for range 9 {
		require.NoError(t, tryDequeue(t, q).Nack(time.Hour))
	}
	corruptSegment(t, segments(t, dir)[0], []byte("BROKEN"))
	clock.Advance(2 * time.Hour)
	vs, ms, err := tq.DequeueBatch(ctx, 9)
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.Equal(t, len(vs), len(ms))
	require.NotEmpty(t, vs)
	require.Equal(t, "A|"+pad, vs[len(vs)-1], "the last message of the batch, in the sound segment, is decoded")
	require.NoError(t, ms.Ack())
}

// A batch leases the messages ready again first, then reads on at the
// cursor; damage met there failed the call after the first ones were
// leased, and they were lost to it as well.
func TestBatchBesideDamageAtCursor(t *testing.T) {
	clock := newFakeClock()
	o := queue.Options{SegmentSize: 4096, MaxDeliveries: 3, ManualRequeue: true, Clock: clock, AckTimeout: time.Minute}
	testhook.SetManualCompaction(&o)
	dir := t.TempDir()
	q := open(t, dir, &o)
	pad := string(bytes.Repeat([]byte("p"), 600))
	id := enqueue(t, q, "A|"+pad)
	enqueue(t, q, "BROKEN|"+pad)
	for i := range 7 {
		enqueue(t, q, fmt.Sprintf("f%d|%s", i, pad))
	}
	require.Len(t, segments(t, dir), 2, "the damaged message's segment is sealed")
	require.NoError(t, tryDequeue(t, q).Nack(time.Hour))
	require.NoError(t, q.Close()) // its snapshot keeps the damage below it, met at delivery
	corruptSegment(t, segments(t, dir)[0], []byte("BROKEN"))
	q = open(t, dir, &o)
	defer q.Close()
	clock.Advance(2 * time.Hour)

	ms, err := q.DequeueBatch(context.Background(), 10)
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.Len(t, ms, 1, "A, leased before the cursor met the damage, is returned")
	require.Equal(t, id, ms[0].ID)
	require.Equal(t, "A|"+pad, string(ms[0].Payload))
	require.Equal(t, 2, ms[0].Deliveries)
	require.NoError(t, ms[0].Ack())
}
