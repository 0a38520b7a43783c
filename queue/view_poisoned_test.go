package queue_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
)

// viewOpener opens a queue in dir on fs and makes the state before the
// change under test; it returns the change, the view under test and Close.
type viewOpener func(t *testing.T, dir string, fs *faultfs.FS) (change func() error, view func() any, close func() error)

func deadLetterView(t *testing.T, dir string, fs *faultfs.FS) (func() error, func() any, func() error) {
	o := &queue.Options{ManualRequeue: true}
	if fs != nil {
		o.FS = fs
	}
	q := open(t, dir, o)
	enqueue(t, q, "first", queue.WithID("first"))
	m := tryDequeue(t, q)
	view := func() any {
		dls, err := q.DeadLetters(0, 0)
		require.NoError(t, err)
		dead, err := q.Browse(queue.StateDead, 0, 10)
		require.NoError(t, err)
		return []int{len(dls), len(dead)}
	}
	return func() error { return m.DeadLetter("why") }, view, q.Close
}

func purgeDeadView(t *testing.T, dir string, fs *faultfs.FS) (func() error, func() any, func() error) {
	o := &queue.Options{ManualRequeue: true}
	if fs != nil {
		o.FS = fs
	}
	q := open(t, dir, o)
	enqueue(t, q, "first", queue.WithID("first"))
	require.NoError(t, tryDequeue(t, q).DeadLetter("why"))
	view := func() any {
		dls, err := q.DeadLetters(0, 0)
		require.NoError(t, err)
		return len(dls)
	}
	return func() error { return q.PurgeDead("first") }, view, q.Close
}

func enqueueView(t *testing.T, dir string, fs *faultfs.FS) (func() error, func() any, func() error) {
	o := &queue.Options{}
	if fs != nil {
		o.FS = fs
	}
	q := open(t, dir, o)
	enqueue(t, q, "a", queue.WithID("a"))
	in, err := q.Browse(queue.StateReady, 0, 10)
	require.NoError(t, err)
	require.Len(t, in, 1)
	next := in[0].Seq + 1 // the sequence the enqueue under test takes
	view := func() any {
		ready, err := q.Browse(queue.StateReady, 0, 10)
		require.NoError(t, err)
		var ids []string
		for _, m := range ready {
			ids = append(ids, m.ID)
		}
		_, err = q.Peek(next)
		require.ErrorIs(t, err, queue.ErrNotFound, "peek of sequence %d", next)
		return ids
	}
	change := func() error {
		_, err := q.Enqueue(context.Background(), []byte("b"), queue.WithID("b"))
		return err
	}
	return change, view, q.Close
}

func keysView(t *testing.T, dir string, fs *faultfs.FS) (func() error, func() any, func() error) {
	o := &queue.SortedOptions{Options: queue.Options{ManualRequeue: true}}
	if fs != nil {
		o.FS = fs
	}
	s, err := queue.OpenSorted[int64](dir, o)
	require.NoError(t, err)
	require.NoError(t, s.Publish(context.Background(), 1, "a", []byte("old")))
	view := func() any {
		ks, err := s.Keys("", 10)
		require.NoError(t, err)
		var names []string
		for _, k := range ks {
			names = append(names, k.Key)
		}
		return names
	}
	return func() error { return s.Publish(context.Background(), 2, "b", []byte("new")) }, view, s.Close
}

// TestViewsOfPoisonedLog: once a failed write has poisoned the log, the
// views (DeadLetters and Browse of a dead-lettering whose write failed,
// DeadLetters of a purge whose write failed,
// Browse and Peek of an enqueue whose write failed, Keys of a publish
// whose write failed) show the log as written, what a reopen shows (the
// state before the change), as Stats counts it: never the change that no
// disk holds, and no poison error of a read of it.
func TestViewsOfPoisonedLog(t *testing.T) {
	cases := map[string]viewOpener{
		"DeadLetters": deadLetterView, "Enqueue": enqueueView, "Keys": keysView,
		"PurgeDead": purgeDeadView,
	}
	for name, openCase := range cases {
		t.Run(name, func(t *testing.T) {
			// A dry run finds the change's first batch write.
			fs := faultfs.New(0)
			change, _, closeQ := openCase(t, t.TempDir(), fs)
			before := len(fs.Ops())
			require.NoError(t, change())
			at := 0
			for i, op := range fs.Ops()[before:] {
				if op.Kind == "write-batch" {
					at = before + i + 1
					break
				}
			}
			require.NotZero(t, at)
			require.NoError(t, closeQ())

			dir := t.TempDir()
			change, view, closeQ := openCase(t, dir, faultfs.New(at))
			want := view()
			require.ErrorIs(t, change(), faultfs.ErrInjected)
			require.Equal(t, want, view(), "poisoned")
			require.Error(t, closeQ())
		})
	}
}
