package queue

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCloseReportsUnlockFailure: a failure to release the directory's
// lock at Close reaches the caller, for a writable and a read-only queue:
// a caller told Close went well would hand the directory over while it
// may still be locked.
func TestCloseReportsUnlockFailure(t *testing.T) {
	for _, readOnly := range []bool{false, true} {
		dir := closedQueueDir(t)
		release, released := failingRelease()
		o := &Options{ReadOnly: readOnly}
		o.release = release
		q, err := Open(dir, o)
		require.NoError(t, err)
		require.ErrorIs(t, q.Close(), errUnlockInjected, "read-only %v", readOnly)
		require.True(t, *released, "Close released the lock through its seam")
		q, err = Open(dir, nil)
		require.NoError(t, err, "the lock was released beside the failure")
		require.NoError(t, q.Close())
	}
}

// TestOpenFailureReportsUnlockFailure: an Open that fails after taking
// the directory's lock reports a failure to release it beside its own
// error, for a writable and a read-only open.
func TestOpenFailureReportsUnlockFailure(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenSorted[int64](dir, nil)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	release, released := failingRelease()
	o := &Options{}
	o.release = release
	_, err = Open(dir, o) // a sorted queue's directory opened as an ack queue
	require.ErrorIs(t, err, ErrWrongKind)
	require.ErrorIs(t, err, errUnlockInjected)
	require.True(t, *released)

	dir = closedQueueDir(t)
	release, released = failingRelease()
	o = &Options{ReadOnly: true}
	o.release = release
	o.ident = Identity{Kind: KindSorted, SortKey: "int64"}
	_, err = Open(dir, o) // an ack queue's directory inspected as a sorted queue
	require.ErrorIs(t, err, ErrWrongKind)
	require.ErrorIs(t, err, errUnlockInjected)
	require.True(t, *released)
}
