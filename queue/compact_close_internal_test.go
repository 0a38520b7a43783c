package queue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/wal"
)

// TestCompactionAfterClose: the compaction of a Compact that passed its
// check of a closed queue before Close, and that takes its turn only
// after Close's snapshot (Close waits for a compaction under way, not for
// one about to start), returns ErrClosed: it neither reports a compaction
// it did not make nor runs on while Close closes the log under it (which
// answered the closed log's error from the middle of its copies forward).
// The log is over its bound (a leased message pins segments of acked
// ones), so such a compaction would copy forward.
func TestCompactionAfterClose(t *testing.T) {
	ctx := context.Background()
	q, err := Open(t.TempDir(), &Options{SegmentSize: 4096, AckTimeout: time.Hour, manualCompact: true})
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("old"))
	require.NoError(t, err)
	_, err = q.TryDequeue() // leased: it pins the log's front
	require.NoError(t, err)
	for range 100 {
		_, err := q.Enqueue(ctx, make([]byte, 100))
		require.NoError(t, err)
		m, err := q.TryDequeue()
		require.NoError(t, err)
		require.NoError(t, m.Ack())
	}
	require.True(t, q.overBound(q.mu.st.liveBytes()), "the log is over its bound before Close")
	require.NoError(t, q.Close())
	require.ErrorIs(t, q.compact(), ErrClosed)
}

// TestCompactionBesidePoisonedClose: a Close of a poisoned queue takes no
// snapshot, but still waits for a compaction under way before it closes
// the log: the compaction, whose snapshot was being written when another
// call's write failed, answers the failure that poisoned the log (or
// ErrClosed), not the closed log's error from its truncation.
func TestCompactionBesidePoisonedClose(t *testing.T) {
	ctx := context.Background()
	fsys := faultfs.New(0)
	var q *Queue
	var once sync.Once
	closed := make(chan error, 1)
	step := func(name string) {
		if name != "written" {
			return
		}
		once.Do(func() {
			fsys.FailNext(wal.StoreWriteBatch)
			_, err := q.Enqueue(ctx, []byte("its write fails"))
			require.ErrorIs(t, err, faultfs.ErrInjected)
			go func() { closed <- q.Close() }()
			select { // Close, done with, while the compaction holds its snapshot, or waiting for it
			case err := <-closed:
				closed <- err
			case <-time.After(time.Second):
			}
		})
	}
	var err error
	q, err = Open(t.TempDir(), &Options{FS: fsys, snapshotStep: step, manualCompact: true})
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("a change to snapshot"))
	require.NoError(t, err)
	err = q.Compact()
	if !errors.Is(err, faultfs.ErrInjected) && !errors.Is(err, ErrClosed) {
		t.Fatalf("Compact beside the Close of a poisoned queue: %v", err)
	}
	require.ErrorIs(t, <-closed, faultfs.ErrInjected)
}
