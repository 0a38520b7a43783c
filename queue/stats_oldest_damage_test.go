package queue_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// Stats reads the time of the oldest never-delivered message from its
// enqueue record. A record that could not be read (here: damaged on disk
// after a clean Close, in a sealed segment below the snapshot, which the
// reopen does not read) left OldestEnqueuedAt zero, or the time of a younger message
// Stats holds in memory, with no error anywhere: a backlog alert read a
// healthy queue. Stats now says why in OldestErr, wrapping ErrCorrupt, and
// OldestEnqueuedAt covers the other messages.
func TestStatsOldestDamaged(t *testing.T) {
	const younger = 7 // messages after the damaged one, to seal its segment
	for _, tc := range []struct {
		name    string
		delayed bool // an older message, delayed: Stats holds its time in memory
	}{{"alone", false}, {"beside an older delayed one", true}} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			o := queue.Options{SegmentSize: 4096, ManualRequeue: true, Clock: clock}
			testhook.SetManualCompaction(&o)
			dir := t.TempDir()
			q := open(t, dir, &o)
			older := clock.Now()
			if tc.delayed {
				enqueue(t, q, "delayed", queue.WithDelay(time.Hour))
			}
			clock.Advance(time.Minute)
			pad := strings.Repeat("p", 600)
			enqueue(t, q, "BROKEN|"+pad)
			clock.Advance(time.Minute)
			for i := range younger {
				enqueue(t, q, fmt.Sprint("younger ", i, "|", pad))
			}
			require.Len(t, segments(t, dir), 2, "the damaged message's segment is sealed: the open does not check it")
			require.NoError(t, q.Close())
			corruptLog(t, dir, []byte("BROKEN"))

			q = open(t, dir, &o)
			defer q.Close()
			s := q.Stats()
			require.EqualValues(t, 1+younger, s.Ready)
			require.NoError(t, s.CountsErr)
			require.ErrorIs(t, s.OldestErr, queue.ErrCorrupt, "OldestEnqueuedAt %v", s.OldestEnqueuedAt)
			require.ErrorContains(t, s.OldestErr, "walq repair")
			if tc.delayed {
				require.Equal(t, older.UnixNano(), s.OldestEnqueuedAt.UnixNano(), "the delayed message's time")
			} else {
				require.True(t, s.OldestEnqueuedAt.IsZero(), "OldestEnqueuedAt %v", s.OldestEnqueuedAt)
			}
			m := q.Metrics()
			require.ErrorIs(t, m.OldestErr, queue.ErrCorrupt)
			_, err := q.TryDequeue()
			require.ErrorIs(t, err, queue.ErrCorrupt, "a delivery meets the same damage")
		})
	}
}

// The reads Stats does not wait for or cannot make are not failures: a
// queue whose oldest message is sound reports no OldestErr, open or closed.
func TestStatsOldestErrQuiet(t *testing.T) {
	clock := newFakeClock()
	q := open(t, t.TempDir(), &queue.Options{Clock: clock})
	enqueued := clock.Now()
	enqueue(t, q, "first")
	s := q.Stats()
	require.NoError(t, s.OldestErr)
	require.Equal(t, enqueued.UnixNano(), s.OldestEnqueuedAt.UnixNano())
	require.NoError(t, q.Close())
	s = q.Stats()
	require.True(t, s.Closed)
	require.NoError(t, s.OldestErr, "a closed log is not a read failure")
}

// A read error at the oldest never-delivered message's record is
// OldestErr too, naming the read's error, not ErrCorrupt; it clears at the
// next Stats whose read passes, as an I/O error may.
func TestStatsOldestReadError(t *testing.T) {
	clock := newFakeClock()
	fs := &readErrorFS{}
	o := queue.Options{FS: fs, ManualRequeue: true, Clock: clock}
	testhook.SetManualCompaction(&o)
	dir := t.TempDir()
	q := open(t, dir, &o)
	enqueued := clock.Now()
	enqueue(t, q, "first")
	require.NoError(t, q.Close())
	q = open(t, dir, &o)
	defer q.Close()

	fs.failReads.Store(1)
	s := q.Stats()
	require.ErrorIs(t, s.OldestErr, syscall.EIO)
	require.NotErrorIs(t, s.OldestErr, queue.ErrCorrupt)
	require.True(t, s.OldestEnqueuedAt.IsZero(), "OldestEnqueuedAt %v", s.OldestEnqueuedAt)
	s = q.Stats()
	require.NoError(t, s.OldestErr)
	require.Equal(t, enqueued.UnixNano(), s.OldestEnqueuedAt.UnixNano())
}
