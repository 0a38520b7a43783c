package queue_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestDeadLettersWhileCopiedForward: DeadLetters reads each dead letter's
// payload where the index says it is; a compaction that has just copied it
// forward points the index at a record appended but maybe not yet written,
// and the read failed ("record not in log: LSN n outside [1, n-1]"). The
// interleaving is the housekeeper's: the case runs many rounds. Found by
// FuzzQueueModel.
func TestDeadLettersWhileCopiedForward(t *testing.T) {
	o := queue.Options{Sync: queue.SyncAlways, SegmentSize: 4096, SnapshotBytes: 4096, MaxDeliveries: 1}
	q := open(t, t.TempDir(), &o)
	defer q.Close()
	big := bytes.Repeat([]byte("x"), 3000)
	// Dead letters pin the front of the log: every compaction that finds
	// the log over its bound copies them forward.
	for i := range 3 {
		enqueue(t, q, fmt.Sprint("dead", i, "|", string(big)))
		require.NoError(t, tryDequeue(t, q).DeadLetter("pin"))
	}
	for i := range 150 {
		// Each round writes about a segment: the housekeeper compacts.
		enqueue(t, q, string(big))
		require.NoError(t, tryDequeue(t, q).Ack())
		dl, err := q.DeadLetters(0, 10)
		require.NoError(t, err, "round %d", i)
		require.Len(t, dl, 3)
	}
}

// TestRequeueAllDeadBesidePurge: a purge and a requeue of dead letters
// that run while RequeueAllDead checks them: it requeues the others
// without error, the purged letter stays gone and the requeued one is
// not requeued twice.
func TestRequeueAllDeadBesidePurge(t *testing.T) {
	fsys := &gateFS{}
	o := queue.Options{Sync: queue.SyncAlways, SegmentSize: 4096, FS: fsys}
	testhook.SetManualCompaction(&o)
	q := open(t, t.TempDir(), &o)
	defer q.Close()
	for i := range 3 {
		enqueue(t, q, fmt.Sprint("dead", i, "|", string(bytes.Repeat([]byte("d"), 1500))), queue.WithID(fmt.Sprint("d", i)))
		require.NoError(t, tryDequeue(t, q).DeadLetter("pin"))
	}
	for range 6 { // push the letters out of the log's entry cache
		enqueue(t, q, string(bytes.Repeat([]byte("b"), 3000)))
		require.NoError(t, tryDequeue(t, q).Ack())
	}
	n, err := whileReadHeld(t, fsys, q.RequeueAllDead, func() {
		require.NoError(t, q.PurgeDead("d1"))
		require.NoError(t, q.RequeueDead("d2"))
	})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	st := q.Stats()
	require.EqualValues(t, 0, st.Dead)
	require.EqualValues(t, 2, st.Ready)
}

// deadLettersOutOfCache opens a queue on fsys with the dead letters d0,
// d1 and d2, pushed out of the log's entry cache, and acked messages
// behind them for a compaction to drop. d0 is alone in its segment: a
// read of it held does not hold up a compaction that copies the others
// forward.
func deadLettersOutOfCache(t *testing.T, fsys *gateFS) *queue.Queue {
	t.Helper()
	o := queue.Options{Sync: queue.SyncAlways, SegmentSize: 4096, FS: fsys}
	testhook.SetManualCompaction(&o)
	q := open(t, t.TempDir(), &o)
	for i := range 3 {
		enqueue(t, q, fmt.Sprint("dead", i, "|", string(bytes.Repeat([]byte("d"), 1500))), queue.WithID(fmt.Sprint("d", i)))
		require.NoError(t, tryDequeue(t, q).DeadLetter("pin"))
	}
	for range 12 {
		enqueue(t, q, string(bytes.Repeat([]byte("b"), 3000)))
		require.NoError(t, tryDequeue(t, q).Ack())
	}
	return q
}

// whileReadHeld runs call with the next read of the log file held, runs
// meanwhile while it is held, then releases it and returns what call
// returned.
func whileReadHeld(t *testing.T, fsys *gateFS, call func() (int, error), meanwhile func()) (int, error) {
	t.Helper()
	released := fsys.holdNextRead()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := call()
		done <- result{n, err}
	}()
	select {
	case <-fsys.held:
	case r := <-done:
		t.Fatalf("the call read nothing from the log file (%d, %v)", r.n, r.err)
	}
	meanwhile()
	close(released)
	r := <-done
	return r.n, r.err
}

// TestRequeueAllDeadBesidePurgeAndCompact: a letter purged while
// RequeueAllDead checks the letters, and compacted out of the log, is
// gone: RequeueAllDead requeues the others and does not fail.
func TestRequeueAllDeadBesidePurgeAndCompact(t *testing.T) {
	fsys := &gateFS{}
	q := deadLettersOutOfCache(t, fsys)
	defer q.Close()
	n, err := whileReadHeld(t, fsys, q.RequeueAllDead, func() {
		require.NoError(t, q.PurgeDead("d1"))
		require.NoError(t, q.Compact())
	})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	st := q.Stats()
	require.EqualValues(t, 0, st.Dead)
	require.EqualValues(t, 2, st.Ready)
}

// TestRequeueAllDeadBesideRequeueAckAndCompact: the same with a letter
// requeued, delivered and acked meanwhile, and another purged.
func TestRequeueAllDeadBesideRequeueAckAndCompact(t *testing.T) {
	fsys := &gateFS{}
	q := deadLettersOutOfCache(t, fsys)
	defer q.Close()
	n, err := whileReadHeld(t, fsys, q.RequeueAllDead, func() {
		require.NoError(t, q.RequeueDead("d1"))
		require.NoError(t, tryDequeue(t, q).Ack())
		require.NoError(t, q.PurgeDead("d0"))
		require.NoError(t, q.Compact())
	})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	st := q.Stats()
	require.EqualValues(t, 0, st.Dead)
	require.EqualValues(t, 1, st.Ready)
}

// deadLetterIDs lists DeadLetters(0, max) with the next read of the log
// held while meanwhile runs, and returns the ids it listed.
func deadLetterIDs(t *testing.T, q *queue.Queue, fsys *gateFS, max int, meanwhile func()) []string {
	t.Helper()
	var dls []queue.DeadLetter
	_, err := whileReadHeld(t, fsys, func() (int, error) {
		var err error
		dls, err = q.DeadLetters(0, max)
		return len(dls), err
	}, meanwhile)
	require.NoError(t, err)
	ids := []string{}
	for _, d := range dls {
		ids = append(ids, d.ID)
	}
	return ids
}

// TestDeadLettersPageBesidePurge: a page of DeadLetters (max 2) that
// leaves out a letter purged while it reads is still full when more
// letters follow: a short page tells a pager (walq dlq list, the
// dashboard's limit+1) that the list ended, and the live letter d2 after
// it would never be shown.
func TestDeadLettersPageBesidePurge(t *testing.T) {
	for _, compact := range []bool{false, true} {
		t.Run(fmt.Sprint("compact=", compact), func(t *testing.T) {
			fsys := &gateFS{}
			q := deadLettersOutOfCache(t, fsys)
			defer q.Close()
			ids := deadLetterIDs(t, q, fsys, 2, func() {
				require.NoError(t, q.PurgeDead("d1"))
				if compact {
					require.NoError(t, q.Compact())
				}
			})
			require.Equal(t, []string{"d0", "d2"}, ids, "a page of 2 while d0 and d2 are dead")
		})
	}
}

// TestDeadLettersBesideRequeue: a letter requeued while DeadLetters
// reads is no longer dead once read, compacted out of the log (its read
// follows the ready copy) or not: it is left out, as DeadValues leaves a
// requeued value out.
func TestDeadLettersBesideRequeue(t *testing.T) {
	for _, compact := range []bool{false, true} {
		t.Run(fmt.Sprint("compact=", compact), func(t *testing.T) {
			fsys := &gateFS{}
			q := deadLettersOutOfCache(t, fsys)
			defer q.Close()
			ids := deadLetterIDs(t, q, fsys, 0, func() {
				require.NoError(t, q.RequeueDead("d1"))
				if compact {
					require.NoError(t, q.Compact())
					require.NotZero(t, q.Stats().Moved)
				}
			})
			require.Equal(t, []string{"d0", "d2"}, ids)
		})
	}
}
