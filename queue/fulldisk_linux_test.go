//go:build linux

package queue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/tmpfs"
	"github.com/walq/walq/queue"
)

// TestFullDiskDrainAfterFreeing: the backlog of a queue that filled its
// disk (SyncAlways) drains once the operator frees a quarter of a
// segment, less than the zeros the log writes ahead of its tail, with a
// Compact every 100 acks to free the drained segments; new enqueues then
// fit again. Every message whose Enqueue returned nil comes back, with its
// payload, once; the one whose Enqueue failed may come back too (its
// record may have been written).
func TestFullDiskDrainAfterFreeing(t *testing.T) {
	mnt := tmpfs.Mount(t, "size=3m")
	filler := filepath.Join(mnt, "filler")
	require.NoError(t, os.WriteFile(filler, make([]byte, 128<<10), 0o600))
	dir := filepath.Join(mnt, "q")
	ctx := context.Background()
	payload := func(i int) string { return fmt.Sprintf("%06d-%0994d", i, i) }

	// Fill the disk.
	o := &queue.Options{SegmentSize: 512 << 10}
	q := open(t, dir, o)
	t.Cleanup(func() { _ = q.Close() }) // before the unmount: a failed check leaves it open
	n := 0
	var err error
	for ; ; n++ {
		if _, err = q.Enqueue(ctx, []byte(payload(n))); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.Error(t, q.Close())

	// Free the filler and drain.
	require.NoError(t, os.Remove(filler))
	q = open(t, dir, o)
	for i := 0; i < n; i++ {
		m, err := q.TryDequeue()
		require.NoError(t, err, "message %d of %d", i, n)
		require.Equal(t, payload(i), string(m.Payload))
		require.NoError(t, m.Ack(), "ack of message %d of %d", i, n)
		if i%100 == 99 { // drained segments make room
			require.NoError(t, q.Compact(), "compaction after message %d of %d", i, n)
		}
	}
	if m, err := q.TryDequeue(); err == nil { // the failed enqueue, written
		require.Equal(t, payload(n), string(m.Payload))
		require.NoError(t, m.Ack())
	}
	requireEmpty(t, q)

	// The compaction frees the log; new enqueues fit again.
	require.NoError(t, q.Compact())
	for i := 0; i < n/2; i++ {
		enqueue(t, q, payload(n+1+i))
	}
	require.NoError(t, q.Close())
	q = open(t, dir, o)
	for i := 0; i < n/2; i++ {
		m := tryDequeue(t, q)
		require.Equal(t, payload(n+1+i), string(m.Payload))
		require.NoError(t, m.Ack())
	}
	requireEmpty(t, q)
	require.NoError(t, q.Close())
}

// TestFullDiskDrainAfterFreeingSorted is TestFullDiskDrainAfterFreeing
// for a sorted queue: every value whose Publish returned nil is pulled
// once, under its key, with its payload, after 128 KiB are freed, and new
// publishes fit after the drain. A compaction whose snapshot does not
// fit yet fails with ENOSPC and poisons nothing.
func TestFullDiskDrainAfterFreeingSorted(t *testing.T) {
	mnt := tmpfs.Mount(t, "size=3m")
	filler := filepath.Join(mnt, "filler")
	require.NoError(t, os.WriteFile(filler, make([]byte, 128<<10), 0o600))
	dir := filepath.Join(mnt, "q")
	ctx := context.Background()
	payload := func(i int64) string { return fmt.Sprintf("%06d-%0994d", i, i) }
	key := func(i int64) string { return fmt.Sprintf("k%02d", i%40) }
	o := &queue.SortedOptions{Options: queue.Options{SegmentSize: 512 << 10}}
	s, err := queue.OpenSorted[int64](dir, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() }) // before the unmount
	var n int64
	for ; ; n++ {
		if err = s.Publish(ctx, n, key(n), []byte(payload(n))); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.Error(t, s.Close())

	// drain pulls every value, checks it and acks its batch; it returns
	// the sort keys seen.
	compactsFull := 0 // compactions whose snapshot did not fit
	drain := func() map[int64]bool {
		seen := map[int64]bool{}
		for pulls := 1; ; pulls++ {
			bs, err := s.TryPull(1)
			if errors.Is(err, queue.ErrEmpty) {
				return seen
			}
			require.NoError(t, err, "pull %d, %d values seen", pulls, len(seen))
			for _, v := range bs[0].Values {
				require.False(t, seen[v.Sort], "value %d pulled twice", v.Sort)
				seen[v.Sort] = true
				require.Equal(t, key(v.Sort), bs[0].Key)
				require.Equal(t, payload(v.Sort), string(v.Payload))
			}
			require.NoError(t, bs[0].Ack(), "ack of pull %d", pulls)
			if pulls%10 == 0 { // its snapshot indexes every pending value: it fits once enough are drained
				if err := s.Compact(); err != nil {
					require.ErrorIs(t, err, syscall.ENOSPC, "compaction after pull %d", pulls)
					compactsFull++
				}
			}
		}
	}
	require.NoError(t, os.Remove(filler))
	s, err = queue.OpenSorted[int64](dir, o)
	require.NoError(t, err)
	seen := drain()
	for i := int64(0); i < n; i++ {
		require.True(t, seen[i], "value %d of %d not pulled", i, n)
	}
	require.LessOrEqual(t, len(seen), int(n)+1) // the failed publish may have been written
	t.Logf("%d values drained, %d compactions whose snapshot did not fit", len(seen), compactsFull)

	require.NoError(t, s.Compact())
	for i := n + 1; i < n+1+n/2; i++ {
		require.NoError(t, s.Publish(ctx, i, key(i), []byte(payload(i))))
	}
	require.NoError(t, s.Close())
	s, err = queue.OpenSorted[int64](dir, o)
	require.NoError(t, err)
	require.Len(t, drain(), int(n/2))
	require.NoError(t, s.Close())
}

// TestFullDiskWindowed: a windowed queue publishes until its disk is full
// (with batches pulled along the way, one left leased). The publish that
// does not fit fails with an error wrapping ENOSPC, and the handle is
// poisoned as the package doc says: the next publish, pull and ack fail
// with it even once 256 KiB are freed, and Close returns it. Reopened and
// drained with a Compact every 10 pulls (one whose snapshot does not fit
// yet fails with ENOSPC and poisons nothing), it delivers every value
// whose publish returned nil once, with its payload; new publishes then
// fit, and survive a reopen.
func TestFullDiskWindowed(t *testing.T) {
	mnt := tmpfs.Mount(t, "size=3m")
	filler := filepath.Join(mnt, "filler")
	require.NoError(t, os.WriteFile(filler, make([]byte, 256<<10), 0o600))
	dir := filepath.Join(mnt, "q")
	ctx := context.Background()
	o := &queue.WindowOptions{SortedOptions: queue.SortedOptions{Options: queue.Options{SegmentSize: 512 << 10}}, Window: time.Millisecond}
	w, err := queue.OpenWindowed(dir, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() }) // before the unmount

	// Fill the disk, pulling and acking a batch every 50 publishes and
	// leaving the first one pulled leased.
	acked := map[int]bool{}
	var leased *queue.Batch[time.Time]
	n := 0
	for ; ; n++ {
		if err = w.Publish(ctx, fullKey(n), []byte(fullPayload(n))); err != nil {
			break
		}
		if n%50 != 49 {
			continue
		}
		time.Sleep(2 * time.Millisecond) // the window of the key published first passes
		bs, err := w.TryPull(1)
		require.NoError(t, err, "pull after publish %d", n)
		if leased == nil {
			leased = bs[0]
			continue
		}
		require.NoError(t, bs[0].Ack(), "ack after publish %d", n)
		for _, v := range bs[0].Values {
			acked[fullIndex(t, v.Payload)] = true
		}
	}
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.NotNil(t, leased)

	// Poisoned: every later write, delivery and settle fails with it, also
	// once space is freed (on the still-full disk each write would fail
	// with ENOSPC of its own, poisoned or not).
	require.NoError(t, os.Remove(filler))
	_, cause, ok := strings.Cut(err.Error(), "wal: ")
	require.True(t, ok, "the failed publish names the log's write: %v", err)
	sticky := func(what string, err error) {
		t.Helper()
		require.ErrorIs(t, err, syscall.ENOSPC, what)
		require.ErrorContains(t, err, cause, what+": not the error that poisoned the log")
	}
	sticky("publish after the failure", w.Publish(ctx, "k", []byte("x")))
	time.Sleep(2 * time.Millisecond)
	_, err = w.TryPull(1)
	sticky("pull after the failure", err)
	sticky("ack after the failure", leased.Ack())
	sticky("close after the failure", w.Close())

	// Reopen on the freed disk, drain.
	w, err = queue.OpenWindowed(dir, o)
	require.NoError(t, err)
	seen := map[int]bool{}
	compactsFull := 0
	time.Sleep(2 * time.Millisecond)
	for pulls := 1; ; pulls++ {
		bs, err := w.TryPull(1)
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		require.NoError(t, err, "pull %d, %d values seen", pulls, len(seen))
		for _, v := range bs[0].Values {
			i := fullIndex(t, v.Payload)
			require.False(t, seen[i], "value %d pulled twice", i)
			require.False(t, acked[i], "value %d pulled again after its ack returned nil", i)
			require.Equal(t, fullKey(i), bs[0].Key)
			seen[i] = true
		}
		require.NoError(t, bs[0].Ack(), "ack of pull %d", pulls)
		if pulls%10 == 0 {
			if err := w.Compact(); err != nil {
				require.ErrorIs(t, err, syscall.ENOSPC, "compaction after pull %d", pulls)
				compactsFull++
			}
		}
	}
	for i := 0; i < n; i++ {
		require.True(t, acked[i] || seen[i], "value %d of %d lost", i, n)
	}
	require.LessOrEqual(t, len(seen)+len(acked), n+1) // the failed publish may have been written
	t.Logf("%d published, %d acked before the failure, %d drained, %d compactions whose snapshot did not fit", n, len(acked), len(seen), compactsFull)

	// New publishes fit again, and survive a reopen.
	require.NoError(t, w.Compact())
	for i := n + 1; i < n+1+n/2; i++ {
		require.NoError(t, w.Publish(ctx, fullKey(i), []byte(fullPayload(i))), "publish %d after the drain", i)
	}
	require.NoError(t, w.Close())
	w, err = queue.OpenWindowed(dir, o)
	require.NoError(t, err)
	time.Sleep(2 * time.Millisecond)
	again := 0
	for {
		bs, err := w.TryPull(1)
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		require.NoError(t, err)
		for _, v := range bs[0].Values {
			require.Greater(t, fullIndex(t, v.Payload), n)
			again++
		}
		require.NoError(t, bs[0].Ack())
	}
	require.Equal(t, n/2, again)
	require.NoError(t, w.Close())
}
