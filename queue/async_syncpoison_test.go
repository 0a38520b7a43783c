package queue_test

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// syncGate is a writeGate whose files, once the gate is armed for it, hold
// their next Datasync until the test releases it; the fsync is then made,
// or fails with syncErr when that is set.
type syncGate struct {
	*writeGate
	smu       sync.Mutex
	syncArmed bool
	syncErr   error         // what the armed fsync returns instead of being made; nil: it is made
	syncHeld  chan struct{} // closed once the armed fsync waits
	syncFreed chan struct{} // closed to let it go on
}

// newSyncGate returns a syncGate whose writes are made, not armed yet.
func newSyncGate() *syncGate {
	return &syncGate{writeGate: newWriteGate(nil), syncHeld: make(chan struct{}), syncFreed: make(chan struct{})}
}

// armSync holds the next fsync until syncFreed is closed; it then fails
// with fail, or is made when fail is nil.
func (g *syncGate) armSync(fail error) {
	g.smu.Lock()
	g.syncArmed, g.syncErr = true, fail
	g.smu.Unlock()
}

func (g *syncGate) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	f, err := g.writeGate.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &gatedFile{File: f, g: g}, nil
}

func (g *syncGate) Open(name string) (wal.File, error) {
	f, err := g.writeGate.Open(name)
	if err != nil {
		return nil, err
	}
	return &gatedFile{File: f, g: g}, nil
}

type gatedFile struct {
	wal.File
	g *syncGate
}

func (f *gatedFile) Datasync() error {
	f.g.smu.Lock()
	hold, fail := f.g.syncArmed, f.g.syncErr
	f.g.syncArmed = false
	f.g.smu.Unlock()
	if hold {
		close(f.g.syncHeld)
		<-f.g.syncFreed
		if fail != nil {
			return fail
		}
	}
	return f.File.Datasync()
}

// Under SyncAlways, when the log is poisoned while an fsync runs (here a
// consumer's lease write fails meanwhile), the calls that fsync covers are
// told the error, although it succeeds and their records are durable: no
// Pending reports success after the log refused a write. The message of
// such a failed EnqueueAsync is in the queue after the reopen, as
// Pending.Err says it may be.
func TestEnqueueAsyncFailedButFsynced(t *testing.T) {
	g := &syncGate{writeGate: newWriteGate(errGateWrite), syncHeld: make(chan struct{}), syncFreed: make(chan struct{})}
	close(g.freed) // the armed write fails at once
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{FS: g, ManualRequeue: true, Sync: queue.SyncAlways})
	ctx := context.Background()
	enqueue(t, q, "a")
	g.smu.Lock()
	g.syncArmed = true
	g.smu.Unlock()
	p, err := q.EnqueueAsync(ctx, []byte("b"), queue.WithID("b"))
	require.NoError(t, err)
	<-g.syncHeld // b is written; the fsync covering it runs
	g.arm()
	_, err = q.TryDequeue() // its lease record is written at once, and fails
	require.ErrorIs(t, err, errGateWrite)
	close(g.syncFreed) // the fsync succeeds
	require.ErrorIs(t, p.Wait(ctx), errGateWrite, "a Pending reported success after the log was poisoned")
	require.ErrorIs(t, q.Close(), errGateWrite)

	q = open(t, dir, nil)
	defer q.Close()
	var ids []string
	for {
		m, err := q.TryDequeue()
		if err != nil {
			require.ErrorIs(t, err, queue.ErrEmpty)
			break
		}
		ids = append(ids, m.ID)
	}
	require.Contains(t, ids, "b", "the failed enqueue's record was fsynced: the reopen reads it back")
	require.Len(t, ids, 2)
}
