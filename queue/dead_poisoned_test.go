package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// firstWriteAfter returns the number of the first batch write that fs
// counted after its before-th operation (faultfs.New's failAt for it), or
// 0 when there is none.
func firstWriteAfter(fs *faultfs.FS, before int) int {
	for i, op := range fs.Ops()[before:] {
		if op.Kind == wal.StoreWriteBatch {
			return before + i + 1
		}
	}
	return 0
}

// A change of a dead letter by id (RequeueDead, PurgeDead) on a poisoned
// log returns the error that poisoned it before ErrNotFound, as a settle
// by id does: here after a RequeueDead whose write failed, which the
// state counts as made but no file holds. ErrNotFound ("requeued or
// purged meanwhile") would tell the operator the letter is gone from the
// dead set; the reopen shows it dead still. PurgeAllDead and
// RequeueAllDead return it too, not (0, nil), a healthy "nothing to do".
func TestDeadByIDPoisonedLog(t *testing.T) {
	// run opens a queue on fs, dead-letters "a", and requeues it; it
	// returns the queue, its directory, the requeue's outcome and the
	// operations counted before the requeue.
	run := func(fs *faultfs.FS) (*queue.Queue, string, error, int) {
		dir := t.TempDir()
		q := open(t, dir, &queue.Options{FS: fs, ManualRequeue: true})
		enqueue(t, q, "v", queue.WithID("a"))
		tryDequeue(t, q)
		require.NoError(t, q.DeadLetterID("a", "why"))
		before := len(fs.Ops())
		return q, dir, q.RequeueDead("a"), before
	}
	dry := faultfs.New(0)
	q, _, err, before := run(dry)
	require.NoError(t, err)
	require.NoError(t, q.Close())
	failAt := firstWriteAfter(dry, before)
	require.NotZero(t, failAt, "the requeue's write")
	q, dir, err, _ := run(faultfs.New(failAt))
	require.ErrorIs(t, err, faultfs.ErrInjected)
	for _, id := range []string{"a", "never-dead"} {
		for name, call := range map[string]func() error{
			"RequeueDead": func() error { return q.RequeueDead(id) },
			"PurgeDead":   func() error { return q.PurgeDead(id) },
		} {
			err := call()
			assert.NotErrorIs(t, err, queue.ErrNotFound, "%s(%q) on a poisoned log was refused as if the log were healthy", name, id)
			assert.ErrorIs(t, err, faultfs.ErrInjected, "%s(%q)", name, id)
		}
	}
	for name, call := range map[string]func() (int, error){
		"RequeueAllDead": q.RequeueAllDead,
		"PurgeAllDead":   q.PurgeAllDead,
	} {
		n, err := call()
		assert.ErrorIs(t, err, faultfs.ErrInjected, "%s on a poisoned log answered (%d, %v)", name, n, err)
	}
	require.ErrorIs(t, q.Close(), faultfs.ErrInjected, "Close returns the poison")

	q = open(t, dir, nil)
	defer q.Close()
	ds, err := q.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, ds, 1, "the letter the failed requeue named is dead still")
}

// The dead values of a sorted or windowed queue answer on a poisoned log
// as a Queue's dead letters do (TestDeadByIDPoisonedLog): RequeueDead,
// PurgeDead, RequeueDeadValue, PurgeDeadValue, RequeueAllDead and
// PurgeAllDead return the error that poisoned it, not ErrNotFound nor
// (0, nil), after a RequeueDead whose write failed.
func TestDeadValuesPoisonedLog(t *testing.T) {
	ctx := context.Background()
	t.Run("Sorted", func(t *testing.T) {
		deadValuesPoisonedLog(t, func(dir string, fs wal.FS) (*queue.Sorted[int64], func()) {
			s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: queue.Options{FS: fs}})
			require.NoError(t, err)
			return s, func() { require.NoError(t, s.Publish(ctx, 1, "k", []byte("v"))) }
		})
	})
	t.Run("Windowed", func(t *testing.T) {
		deadValuesPoisonedLog(t, func(dir string, fs wal.FS) (*queue.Sorted[time.Time], func()) {
			clk := newFakeClock()
			w, err := queue.OpenWindowed(dir, &queue.WindowOptions{
				SortedOptions: queue.SortedOptions{Options: queue.Options{FS: fs, Clock: clk}},
				Window:        time.Minute,
			})
			require.NoError(t, err)
			return w.Sorted, func() {
				require.NoError(t, w.Publish(ctx, "k", []byte("v")))
				clk.Advance(time.Minute) // the batch is due
			}
		})
	})
}

// deadValuesPoisonedLog is TestDeadValuesPoisonedLog for the queues open
// returns on fs (nil: the real one), with a function that publishes a
// value and makes its batch due.
func deadValuesPoisonedLog[K queue.SortKey](t *testing.T, open func(dir string, fs wal.FS) (*queue.Sorted[K], func())) {
	// run opens a queue on fs, dead-letters a value, and requeues it; it
	// returns the queue, its directory, the dead value, the requeue's
	// outcome and the operations counted before the requeue.
	run := func(fs *faultfs.FS) (*queue.Sorted[K], string, queue.DeadValue[K], error, int) {
		dir := t.TempDir()
		s, publish := open(dir, fs)
		publish()
		bs, err := s.TryPull(1)
		require.NoError(t, err)
		require.Len(t, bs, 1)
		require.NoError(t, s.DeadLetter(bs[0].Receipt, "why"))
		ds, err := s.DeadValues(0, 0)
		require.NoError(t, err)
		require.Len(t, ds, 1)
		before := len(fs.Ops())
		return s, dir, ds[0], s.RequeueDead(ds[0].Seq), before
	}
	dry := faultfs.New(0)
	s, _, _, err, before := run(dry)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	failAt := firstWriteAfter(dry, before)
	require.NotZero(t, failAt, "the requeue's write")
	s, dir, d, err, _ := run(faultfs.New(failAt))
	require.ErrorIs(t, err, faultfs.ErrInjected)
	never := d
	never.Seq += 1000
	for _, d := range []queue.DeadValue[K]{d, never} {
		for name, call := range map[string]func() error{
			"RequeueDead":      func() error { return s.RequeueDead(d.Seq) },
			"PurgeDead":        func() error { return s.PurgeDead(d.Seq) },
			"RequeueDeadValue": func() error { return s.RequeueDeadValue(d) },
			"PurgeDeadValue":   func() error { return s.PurgeDeadValue(d) },
		} {
			err := call()
			assert.NotErrorIs(t, err, queue.ErrNotFound, "%s(%d) on a poisoned log was refused as if the log were healthy", name, d.Seq)
			assert.ErrorIs(t, err, faultfs.ErrInjected, "%s(%d)", name, d.Seq)
		}
	}
	for name, call := range map[string]func() (int, error){
		"RequeueAllDead": s.RequeueAllDead,
		"PurgeAllDead":   s.PurgeAllDead,
	} {
		n, err := call()
		assert.ErrorIs(t, err, faultfs.ErrInjected, "%s on a poisoned log answered (%d, %v)", name, n, err)
	}
	require.ErrorIs(t, s.Close(), faultfs.ErrInjected, "Close returns the poison")

	s, _ = open(dir, nil)
	defer s.Close()
	ds, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 1, "the value the failed requeue named is dead still")
}
