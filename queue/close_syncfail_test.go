package queue_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
)

// closeSyncFailed leaves in a new directory a queue with a message "a"
// leased for an hour and "b" ready, closed by a
// Close whose close record was written but whose fsync failed. It returns
// the directory, a's receipt, and the log segment's path and the offset
// the close record was written at.
func closeSyncFailed(t *testing.T, mode queue.SyncMode) (dir string, a queue.Receipt, seg string, at int64) {
	t.Helper()
	dir = t.TempDir()
	fsys := faultfs.New(0)
	q := open(t, dir, &queue.Options{FS: fsys, AckTimeout: time.Hour, ManualRequeue: true, Sync: mode})
	enqueue(t, q, "a")
	m := tryDequeue(t, q)
	require.Equal(t, "a", string(m.Payload))
	enqueue(t, q, "b")
	st := q.Stats()
	require.Len(t, st.Segments, 1)
	seg, at = st.Segments[0].Path, st.Segments[0].Bytes
	fsys.FailNext("fsync")
	require.ErrorIs(t, q.Close(), faultfs.ErrInjected)
	hit, ok := fsys.Hit()
	require.True(t, ok)
	require.Equal(t, faultfs.Op{Kind: "fsync", Path: seg}, hit, "the fsync that failed is the log's, after the close record")
	return dir, m.Receipt, seg, at
}

// zeroFrom overwrites the file at path with zeros from offset at on: what
// reads back from a preallocated segment whose unsynced pages were lost.
func zeroFrom(t *testing.T, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(t, err)
	tail := make([]byte, fi.Size()-at)
	_, err = f.ReadAt(tail, at)
	require.NoError(t, err)
	require.NotEqual(t, make([]byte, len(tail)), tail, "the close record was written at %d", at)
	_, err = f.WriteAt(make([]byte, len(tail)), at)
	require.NoError(t, err)
}

// A Close whose close record was written but whose fsync failed returns
// the failure. The next Open trusts the record if it reads it back (the
// page cache kept it, or it reached the disk): a clean close, whose leases
// run on to their deadline and can be acked by the next process. If the
// record is lost (its pages dropped, a power loss), the next Open recovers
// as after a crash: the leases end at once.
func TestCloseSyncFailed(t *testing.T) {
	modes := []struct {
		name string
		mode queue.SyncMode
	}{{"SyncAlways", queue.SyncAlways}, {"SyncInterval", queue.SyncInterval}, {"SyncNever", queue.SyncNever}}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { closeSyncFailedReopen(t, m.mode) })
	}
}

func closeSyncFailedReopen(t *testing.T, mode queue.SyncMode) {
	t.Run("record read back", func(t *testing.T) {
		dir, a, _, _ := closeSyncFailed(t, mode)
		q := open(t, dir, nil)
		defer q.Close()
		rec := q.Recovery()
		require.True(t, rec.Clean, "the close record read back is a clean close")
		require.Zero(t, rec.Requeued)
		st := q.Stats()
		require.EqualValues(t, 1, st.InFlight, "a's lease runs on")
		require.Equal(t, "b", string(tryDequeue(t, q).Payload))
		requireEmpty(t, q)
		require.NoError(t, q.Ack(a), "the next process acks a's lease")
	})
	t.Run("record lost", func(t *testing.T) {
		dir, a, seg, at := closeSyncFailed(t, mode)
		zeroFrom(t, seg, at)
		q := open(t, dir, nil)
		defer q.Close()
		rec := q.Recovery()
		require.False(t, rec.Clean)
		require.Equal(t, 1, rec.Requeued, "a's lease ends at once, as after a crash")
		got := map[string]int{}
		for range 2 {
			m := tryDequeue(t, q)
			got[string(m.Payload)] = m.Deliveries
		}
		require.Equal(t, map[string]int{"a": 2, "b": 1}, got)
		require.ErrorIs(t, q.Ack(a), queue.ErrLeaseLost)
	})
}
