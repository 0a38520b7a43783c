package queue_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

func TestReopenAfterClose(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, nil)
	for i := 0; i < 4; i++ {
		enqueue(t, q, fmt.Sprint(i), queue.WithID(fmt.Sprint("id", i)))
	}
	acked := tryDequeue(t, q)
	require.NoError(t, acked.Ack())
	held := tryDequeue(t, q)
	require.NoError(t, q.Close())

	q = open(t, dir, nil)
	defer q.Close()
	require.True(t, q.Recovery().Clean)
	require.NoError(t, q.Ack(held.Receipt), "a lease survives a clean close")
	require.Equal(t, "2", string(tryDequeue(t, q).Payload))
	require.Equal(t, "3", string(tryDequeue(t, q).Payload))
	requireEmpty(t, q)
	_, err := q.Enqueue(context.Background(), nil, queue.WithID("id2"))
	require.ErrorIs(t, err, queue.ErrDuplicate, "dedup survives reopen")
}

func TestCrashMakesLeasesReady(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{MaxDeliveries: 2})
	defer q.Close()
	enqueue(t, q, "a")
	enqueue(t, q, "b")
	enqueue(t, q, "c")
	require.NoError(t, tryDequeue(t, q).Ack())
	tryDequeue(t, q) // b: leased when the process dies

	img := crashImage(t, dir)
	q2 := open(t, img, &queue.Options{MaxDeliveries: 2})
	rec := q2.Recovery()
	require.False(t, rec.Clean)
	require.Equal(t, 1, rec.Requeued)
	m := tryDequeue(t, q2)
	require.Equal(t, "b", string(m.Payload), "a crashed lease is ready at once, first")
	require.Equal(t, 2, m.Deliveries, "the crashed delivery counts")
	require.Equal(t, "c", string(tryDequeue(t, q2).Payload))

	// b crashes its consumer a second time: MaxDeliveries reached.
	img2 := crashImage(t, img)
	require.NoError(t, q2.Close())
	q3 := open(t, img2, &queue.Options{MaxDeliveries: 2})
	defer q3.Close()
	require.Equal(t, 1, q3.Recovery().DeadOnOpen)
	require.Equal(t, "c", string(tryDequeue(t, q3).Payload))
	requireEmpty(t, q3)
	dl, err := q3.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, dl, 1)
	require.Equal(t, "b", string(dl[0].Payload))
	require.Contains(t, dl[0].Reason, "crashed")
}

func TestTornTailIsRepaired(t *testing.T) {
	cases := map[string]func(t *testing.T, path string){
		"cut mid-record": func(t *testing.T, path string) { // the last entry of records: a witness may follow it
			require.NoError(t, os.Truncate(path, lastRecordEnd(t, path)-5))
		},
		"zero-filled tail": func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = f.Write(make([]byte, 4096))
			require.NoError(t, err)
			require.NoError(t, f.Close())
		},
	}
	for name, corrupt := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			q := open(t, dir, nil)
			defer q.Close()
			for i := 0; i < 10; i++ {
				enqueue(t, q, fmt.Sprint(i))
			}
			img := crashImage(t, dir)
			segs := segments(t, img)
			corrupt(t, segs[len(segs)-1])
			q2 := open(t, img, nil)
			defer q2.Close()
			if name == "cut mid-record" {
				require.NotNil(t, q2.Recovery().Log.Torn, "the cut is reported")
			} else {
				require.Nil(t, q2.Recovery().Log.Torn, "zeros after the last entry are a clean end, not a cut")
			}
			var got []string
			for {
				m, err := q2.TryDequeue()
				if err != nil {
					require.ErrorIs(t, err, queue.ErrEmpty)
					break
				}
				got = append(got, string(m.Payload))
			}
			want := 10
			if name == "cut mid-record" {
				want = 9
			}
			require.Len(t, got, want)
			for i, p := range got {
				require.Equal(t, fmt.Sprint(i), p)
			}
		})
	}
}

func TestBitFlipInSealedSegmentIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	o := &queue.Options{SegmentSize: 4096}
	q := open(t, dir, o)
	for i := 0; i < 200; i++ {
		enqueue(t, q, fmt.Sprintf("message %03d", i))
	}
	img := crashImage(t, dir)
	require.NoError(t, q.Close())
	segs := segments(t, img)
	require.Greater(t, len(segs), 2)
	b, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	b[len(b)/2] ^= 0x10
	require.NoError(t, os.WriteFile(segs[0], b, 0o600))

	q2, err := queue.Open(img, o)
	if err == nil {
		// The segment is checked when it is read: delivering its messages.
		defer q2.Close()
		for err == nil {
			_, err = q2.TryDequeue()
		}
	}
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.Contains(t, err.Error(), segs[0][len(img):], "the error names the segment")
}

func TestSnapshotAndTruncation(t *testing.T) {
	dir := t.TempDir()
	o := &queue.Options{SegmentSize: 4096}
	q := open(t, dir, o)
	for i := 0; i < 300; i++ {
		enqueue(t, q, fmt.Sprintf("message %03d", i))
	}
	require.Greater(t, len(segments(t, dir)), 3)
	var cursor uint64
	for i := 0; i < 250; i++ {
		m := tryDequeue(t, q)
		cursor = m.Receipt.Seq + 1
		require.NoError(t, m.Ack())
	}
	require.NoError(t, q.Compact())
	st := q.Stats()
	require.Greater(t, st.Segments[0].FirstLSN, cursor, "the acked messages' segments are gone")
	require.LessOrEqual(t, st.LogBytes, 2*st.LiveBytes+2*4096+4096,
		"the waiting messages were copied forward rather than pin the log")
	require.NotZero(t, st.SnapshotLSN)
	require.EqualValues(t, 50, st.Ready)

	img := crashImage(t, dir)
	q2 := open(t, img, o)
	defer q2.Close()
	require.Equal(t, st.SnapshotLSN, q2.Recovery().SnapshotLSN)
	for i := 250; i < 300; i++ {
		m := tryDequeue(t, q2)
		require.Equal(t, fmt.Sprintf("message %03d", i), string(m.Payload))
	}
	requireEmpty(t, q2)
	require.NoError(t, q.Close())
}

func TestOldMessagesDoNotPinTheLog(t *testing.T) {
	dir := t.TempDir()
	o := &queue.Options{SegmentSize: 4096}
	q := open(t, dir, o)
	enqueue(t, q, "dead early")
	require.NoError(t, tryDequeue(t, q).DeadLetter("kept for inspection"))
	enqueue(t, q, "delayed", queue.WithDelay(time.Hour))
	payload := make([]byte, 200)
	for i := 0; i < 500; i++ {
		_, err := q.Enqueue(context.Background(), payload)
		require.NoError(t, err)
		require.NoError(t, tryDequeue(t, q).Ack())
	}
	require.NoError(t, q.Compact())
	st := q.Stats()
	require.LessOrEqual(t, st.LogBytes, 2*st.LiveBytes+2*4096+4096, "log bounded by live bytes")
	require.GreaterOrEqual(t, st.Moved, uint64(2), "the dead and the delayed message were copied forward")
	require.NoError(t, q.Close())

	q = open(t, dir, o)
	defer q.Close()
	dl, err := q.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Equal(t, "dead early", string(dl[0].Payload))
	require.EqualValues(t, 1, q.Stats().Delayed)
}

// TestDrainCopiesNothingForward: while a large backlog drains, the log
// holds the drain's own lease and ack records behind the never-delivered
// messages. Copying a large backlog forward would write it again and hold
// an index entry per copy in memory; compaction leaves it in place and
// frees the log as the cursor passes. (A few never-delivered messages, up
// to 16,384, are copied: TestSnapshotAndTruncation.)
func TestDrainCopiesNothingForward(t *testing.T) {
	const n, seg = 30_000, 64 << 10
	o := &queue.Options{SegmentSize: seg, Sync: queue.SyncNever}
	q := open(t, t.TempDir(), o)
	defer q.Close()
	ctx := context.Background()
	items := make([]queue.Item, 1000)
	for i := range items {
		items[i] = queue.Item{Payload: []byte("payload")}
	}
	for i := 0; i < n; i += len(items) {
		_, err := q.EnqueueBatch(ctx, items)
		require.NoError(t, err)
	}
	for drained := 0; drained < n-17_000; {
		ms, err := q.DequeueBatch(ctx, 500)
		require.NoError(t, err)
		for _, m := range ms {
			require.NoError(t, m.Ack())
		}
		drained += len(ms)
		require.NoError(t, q.Compact())
	}
	st := q.Stats()
	require.Greater(t, st.LogBytes, 2*st.LiveBytes+2*seg, "the acks outweigh the backlog's rest")
	require.Zero(t, st.Moved, "no message was copied forward")
	for {
		ms, err := q.DequeueBatch(ctx, 500)
		require.NoError(t, err)
		for _, m := range ms {
			require.NoError(t, m.Ack())
		}
		if q.Stats().Ready == 0 {
			break
		}
	}
	require.NoError(t, q.Compact())
	st = q.Stats()
	require.LessOrEqual(t, st.LogBytes, int64(2*seg), "the drained log is freed")
}

func TestConcurrentConsumersEachMessageOnce(t *testing.T) {
	q := open(t, t.TempDir(), nil)
	defer q.Close()
	const producers, consumers, each = 4, 4, 250
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				_, err := q.Enqueue(context.Background(), []byte(fmt.Sprintf("%d-%d", p, i)))
				if err != nil {
					panic(err)
				}
			}
		}(p)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var cw sync.WaitGroup
	for c := 0; c < consumers; c++ {
		cw.Add(1)
		go func() {
			defer cw.Done()
			for {
				ms, err := q.DequeueBatch(ctx, 8)
				if err != nil {
					return // ctx ended: all seen, or the test timed out
				}
				for _, m := range ms {
					if err := m.Ack(); err != nil {
						panic(err)
					}
					mu.Lock()
					seen[string(m.Payload)]++
					if len(seen) == producers*each {
						cancel()
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	cw.Wait()
	require.ErrorIs(t, ctx.Err(), context.Canceled, "ended by the last ack, not by the deadline")
	require.Len(t, seen, producers*each)
	for k, n := range seen {
		require.Equal(t, 1, n, "message %s delivered %d times", k, n)
	}
}

// TestDrainReclaimsDisk: once a queue is drained, a compaction removes
// every segment but the last one that holds records. Where the segments
// roll depends on how the log gathered the records into entries, which
// varies from run to run, so each case first brings the log to its shape:
// records in the tail, or a tail left empty by a roll at the last write.
// In the second case the compaction's Flush writes a witness into the
// empty tail (package wal), an entry the store can truncate to, so the
// sealed segment (dead records only) goes as well.
func TestDrainReclaimsDisk(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tailEmpty bool // the shape wanted: the last write rolled the segment
	}{
		{"records in the tail", false},
		{"last write rolled the segment", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			q := open(t, dir, &queue.Options{SegmentSize: 4096})
			defer func() { q.Close() }() // the queue open at the end
			for i := 0; i < 300; i++ {
				enqueue(t, q, fmt.Sprintf("message %03d", i))
			}
			for i := 0; i < 300; i++ {
				require.NoError(t, tryDequeue(t, q).Ack())
			}
			for i := 0; tailEmpty(q) != tc.tailEmpty; i++ { // payloads of varied sizes move the roll among the records
				require.Less(t, i, 2000, "no round of writes left the log in the shape wanted")
				enqueue(t, q, fmt.Sprintf("shape %04d %s", i, strings.Repeat("x", i%97)))
				require.NoError(t, tryDequeue(t, q).Ack())
			}
			require.NoError(t, q.Compact())
			st := q.Stats()
			require.Len(t, st.Segments, 1, "a drained queue keeps only the tail segment: %v", st.Segments)
			require.False(t, tailEmpty(q), "the tail holds records or a witness")
			require.Zero(t, st.LiveBytes)

			if tc.tailEmpty { // one round of writes fills the empty tail far short of a roll
				enqueue(t, q, "after")
				require.Equal(t, "after", string(tryDequeue(t, q).Payload))
				requireEmpty(t, q)
				require.NoError(t, q.Compact())
				require.Len(t, q.Stats().Segments, 1, "after a write, the drained queue keeps only the tail segment")
			}

			require.NoError(t, q.Close())
			q = open(t, dir, &queue.Options{SegmentSize: 4096})
			requireEmpty(t, q)
			enqueue(t, q, "reopened")
			require.Equal(t, "reopened", string(tryDequeue(t, q).Payload))
		})
	}
}

// tailEmpty reports whether the log's tail segment holds no bytes.
func tailEmpty(q *queue.Queue) bool {
	segs := q.Stats().Segments
	return segs[len(segs)-1].Bytes == 0
}

func TestSalvageCutsDamageForGood(t *testing.T) {
	dir := t.TempDir()
	o := &queue.Options{SegmentSize: 4096}
	q := open(t, dir, o)
	for i := 0; i < 200; i++ {
		enqueue(t, q, fmt.Sprintf("message %03d", i))
	}
	for i := 0; i < 5; i++ {
		require.NoError(t, tryDequeue(t, q).Nack(0)) // five indexed, ready again
	}
	img := crashImage(t, dir)
	require.NoError(t, q.Close())
	segs := segments(t, img)
	b, err := os.ReadFile(segs[1])
	require.NoError(t, err)
	b[len(b)/2] ^= 0x10
	require.NoError(t, os.WriteFile(segs[1], b, 0o600))
	_, err = queue.Verify(img, nil)
	require.ErrorIs(t, err, queue.ErrCorrupt)

	salvage := *o
	salvage.Salvage = true
	q2 := open(t, img, &salvage)
	rec := q2.Recovery()
	require.NotEmpty(t, rec.Log.Salvaged, "the damage is reported")
	lost := 0
	for _, d := range rec.Log.Salvaged {
		lost += int(d.LastLSN - d.FirstLSN + 1)
	}
	require.NoError(t, q2.Close())

	check, err := queue.Verify(img, nil)
	require.NoError(t, err, "the damaged segment is gone from disk")
	require.Empty(t, check.Log.Salvaged)
	q3 := open(t, img, o)
	defer q3.Close()
	got := map[string]bool{}
	for {
		m, err := q3.TryDequeue()
		if err != nil {
			require.ErrorIs(t, err, queue.ErrEmpty)
			break
		}
		require.False(t, got[string(m.Payload)], "no duplicates")
		got[string(m.Payload)] = true
		require.NoError(t, m.Ack())
	}
	require.Equal(t, 200-lost, len(got), "everything but the lost entry's messages is delivered")
}

// lastRecordEnd returns the offset just after the last entry of the
// segment file that holds records (Count > 0): an idle log writes a
// witness, an entry of no record, after its last fsync (wal/witness.go).
func lastRecordEnd(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	end := int64(-1)
	for off := 0; off < len(b); {
		n, k := binary.Uvarint(b[off:])
		if k <= 0 || n < 17 || off+k+int(n) > len(b) {
			break
		}
		if binary.LittleEndian.Uint32(b[off+k+13:]) > 0 {
			end = int64(off + k + int(n))
		}
		off += k + int(n)
	}
	require.Positive(t, end, "%s holds no entry with records", path)
	return end
}
