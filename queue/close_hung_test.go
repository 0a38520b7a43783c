package queue_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
)

// Close has no time limit (its doc): while the fsync of its clean
// shutdown hangs, Close does not return and the directory stays locked, so
// no other Open can write beside a write that may still land. Once the
// fsync returns, so does Close, and the next Open has the queue as it was.
func TestCloseWaitsForHungFsync(t *testing.T) {
	g := &syncGate{writeGate: newWriteGate(nil), syncHeld: make(chan struct{}), syncFreed: make(chan struct{})}
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{FS: g, ManualRequeue: true, Sync: queue.SyncAlways})
	enqueue(t, q, "a")
	g.smu.Lock()
	g.syncArmed = true
	g.smu.Unlock()
	closed := make(chan error, 1)
	go func() { closed <- q.Close() }()
	<-g.syncHeld // Close's record is written; the fsync covering it hangs
	for range 5 {
		_, err := queue.Open(dir, nil)
		require.ErrorIs(t, err, queue.ErrLocked, "another Open while Close's fsync hangs")
		select {
		case err := <-closed:
			t.Fatalf("Close returned (%v) while its fsync hung", err)
		case <-time.After(40 * time.Millisecond):
		}
	}
	close(g.syncFreed)
	require.NoError(t, <-closed)
	q = open(t, dir, &queue.Options{ManualRequeue: true})
	defer q.Close()
	m := tryDequeue(t, q)
	require.Equal(t, "a", string(m.Payload))
	require.NoError(t, m.Ack())
}
