package queue_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
)

// A Pending that failed because the fsync covering its record failed does
// not mean the message is absent: its record was written before the
// fsync, and a reopen (no power loss) finds it in the queue. A producer
// that retries such an EnqueueAsync with its producer-given id after the
// reopen is told ErrDuplicate, and the queue holds the message once.
func TestEnqueueAsyncRetryAfterFailedFsync(t *testing.T) {
	fs := faultfs.New(0)
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{FS: fs, ManualRequeue: true, Sync: queue.SyncAlways})
	ctx := context.Background()
	fs.FailNext("fsync")
	p, err := q.EnqueueAsync(ctx, []byte("v"), queue.WithID("order-7"))
	require.NoError(t, err)
	require.ErrorIs(t, p.Wait(ctx), faultfs.ErrInjected, "the fsync covering the record failed")
	op, hit := fs.Hit()
	require.True(t, hit)
	require.Equal(t, "fsync", op.Kind)
	_, err = q.EnqueueAsync(ctx, []byte("v"), queue.WithID("order-7"))
	require.ErrorIs(t, err, faultfs.ErrInjected, "a retry on the poisoned queue")
	require.ErrorIs(t, q.Close(), faultfs.ErrInjected)

	q = open(t, dir, nil)
	defer q.Close()
	p, err = q.EnqueueAsync(ctx, []byte("v"), queue.WithID("order-7"))
	require.ErrorIs(t, err, queue.ErrDuplicate, "the retry after the reopen: the failed enqueue was written")
	require.Nil(t, p)
	require.Equal(t, "order-7", tryDequeue(t, q).ID)
	requireEmpty(t, q) // once, not twice
}

// waitEnds is a context that ends as soon as a call waits on it (the first
// call of Done): a call that returns its error waited, and one that
// returns without it never blocked.
type waitEnds struct {
	context.Context
	cancel context.CancelFunc
}

func newWaitEnds() *waitEnds {
	ctx, cancel := context.WithCancel(context.Background())
	return &waitEnds{Context: ctx, cancel: cancel}
}

func (c *waitEnds) Done() <-chan struct{} {
	c.cancel()
	return c.Context.Done()
}

// Options.MaxPending bounds the records of asynchronous calls in flight:
// with MaxPending of them appended and none complete (the first one's
// write held), the next EnqueueAsync waits, and appends nothing when its
// context ends; once the held write is made, a call has room again.
func TestMaxPendingBoundsRecordsInFlight(t *testing.T) {
	const window = 4
	g := newWriteGate(nil)
	dir := t.TempDir()
	q := open(t, dir, &queue.Options{FS: g, ManualRequeue: true, MaxPending: window, Sync: queue.SyncNever})
	ctx := context.Background()
	g.arm()
	var ps []*queue.Pending
	for i := range window {
		p, err := q.EnqueueAsync(ctx, []byte(fmt.Sprint(i)))
		require.NoError(t, err, "call %d fits in the window", i)
		ps = append(ps, p)
		if i == 0 {
			<-g.held // none completes until its write is made
		}
	}
	last := q.Stats().LastLSN
	p, err := q.EnqueueAsync(newWaitEnds(), []byte("over"))
	require.ErrorIs(t, err, context.Canceled, "a call past MaxPending records in flight did not wait")
	require.Nil(t, p)
	require.Equal(t, last, q.Stats().LastLSN, "the call that waited appended nothing")

	close(g.freed)
	require.NoError(t, ps[0].Wait(ctx))
	p, err = q.EnqueueAsync(newWaitEnds(), []byte(fmt.Sprint(window)))
	require.NoError(t, err, "the window has room once the first call completed")
	ps = append(ps, p)
	for _, p := range ps {
		require.NoError(t, p.Wait(ctx))
	}
	require.NoError(t, q.Close())

	q = open(t, dir, nil)
	defer q.Close()
	for i := range window + 1 {
		require.Equal(t, fmt.Sprint(i), string(tryDequeue(t, q).Payload))
	}
	requireEmpty(t, q)
}

// Close completes every asynchronous call: once it returned, the Pending
// of every call made before it is done, with success on a healthy log
// (and the reopen holds the messages), and with the error that poisoned
// the log when the held write of the first call fails, or when the fsync
// covering the calls does.
func TestCloseCompletesEveryPending(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gateErr error // the held write's outcome
		fsync   bool  // the next fsync fails
		want    error // every Pending's and Close's error; nil: none
	}{
		{"healthy", nil, false, nil},
		{"write fails", errGateWrite, false, errGateWrite},
		{"fsync fails", nil, true, faultfs.ErrInjected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &faultGate{FS: faultfs.New(0), gate: newWriteGate(tc.gateErr)}
			dir := t.TempDir()
			q := open(t, dir, &queue.Options{FS: g, ManualRequeue: true, Sync: queue.SyncAlways})
			ctx := context.Background()
			enqueue(t, q, "leased")
			m := tryDequeue(t, q)
			if tc.fsync {
				g.FailNext("fsync")
			}
			g.gate.arm()
			const n = 50
			var ps []*queue.Pending
			for i := range n {
				p, err := q.EnqueueAsync(ctx, []byte(fmt.Sprint(i)))
				require.NoError(t, err)
				ps = append(ps, p)
				if i == 0 {
					<-g.gate.held // the others gather behind its write
				}
			}
			p, err := m.AckAsync()
			require.NoError(t, err)
			ps = append(ps, p)

			closed := make(chan error, 1)
			go func() { closed <- q.Close() }()
			close(g.gate.freed)
			err = <-closed
			for i, p := range ps {
				select {
				case <-p.Done():
				default:
					t.Fatalf("call %d of %d: its Pending is not done after Close returned", i, len(ps))
				}
				if tc.want == nil {
					require.NoError(t, p.Err(), "call %d", i)
				} else {
					require.ErrorIs(t, p.Err(), tc.want, "call %d", i)
				}
			}
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.want, "Close returns the poison")
			}
			if tc.want != nil {
				return
			}
			q = open(t, dir, nil)
			defer q.Close()
			for i := range n {
				require.Equal(t, fmt.Sprint(i), string(tryDequeue(t, q).Payload))
			}
			requireEmpty(t, q) // "leased" was acked
		})
	}
}

// faultGate is a faultfs.FS whose store writes also pass a writeGate: the
// gate holds the armed one, then the fault counter sees it.
type faultGate struct {
	*faultfs.FS
	gate *writeGate
}

// StoreOp implements the log's hook for its store's own writes.
func (g *faultGate) StoreOp(op string) error {
	if err := g.gate.StoreOp(op); err != nil {
		return err
	}
	return g.FS.StoreOp(op)
}
