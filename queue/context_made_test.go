package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// A call whose context ends while its record is being written returns
// the change it made, not the context's error, as the README's Contexts
// guarantee says: an enqueue or publish returns success and its message
// is in the queue; a delivery returns what it leased (an error would
// leave it leased, out of reach, until AckTimeout).
func TestContextEndedAfterAppendMakesTheChange(t *testing.T) {
	for name, c := range map[string]struct {
		sorted bool
		setup  func(t *testing.T, q *queue.Queue, s *queue.Sorted[int64])
		call   func(ctx context.Context, q *queue.Queue, s *queue.Sorted[int64]) error
		check  func(t *testing.T, q *queue.Queue, s *queue.Sorted[int64])
	}{
		"Enqueue": {
			call: func(ctx context.Context, q *queue.Queue, _ *queue.Sorted[int64]) error {
				_, err := q.Enqueue(ctx, []byte("v"))
				return err
			},
			check: func(t *testing.T, q *queue.Queue, _ *queue.Sorted[int64]) { require.NoError(t, tryDequeue(t, q).Ack()) },
		},
		"EnqueueBatch": {
			call: func(ctx context.Context, q *queue.Queue, _ *queue.Sorted[int64]) error {
				_, err := q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("v")}, {Payload: []byte("w")}})
				return err
			},
			check: func(t *testing.T, q *queue.Queue, _ *queue.Sorted[int64]) {
				ms, err := q.DequeueBatch(context.Background(), 10)
				require.NoError(t, err)
				require.Len(t, ms, 2)
			},
		},
		"Dequeue": {
			setup: func(t *testing.T, q *queue.Queue, _ *queue.Sorted[int64]) { enqueue(t, q, "v") },
			call: func(ctx context.Context, q *queue.Queue, _ *queue.Sorted[int64]) error {
				m, err := q.Dequeue(ctx)
				if err == nil {
					err = m.Ack()
				}
				return err
			},
			check: func(t *testing.T, q *queue.Queue, _ *queue.Sorted[int64]) { requireEmpty(t, q) },
		},
		"Publish": {
			sorted: true,
			call: func(ctx context.Context, _ *queue.Queue, s *queue.Sorted[int64]) error {
				return s.Publish(ctx, 1, "k", []byte("v"))
			},
			check: func(t *testing.T, _ *queue.Queue, s *queue.Sorted[int64]) {
				bs, err := s.TryPull(10)
				require.NoError(t, err)
				require.Len(t, bs, 1)
			},
		},
		"Pull": {
			sorted: true,
			setup: func(t *testing.T, _ *queue.Queue, s *queue.Sorted[int64]) {
				require.NoError(t, s.Publish(context.Background(), 1, "k", []byte("v")))
			},
			call: func(ctx context.Context, _ *queue.Queue, s *queue.Sorted[int64]) error {
				bs, err := s.Pull(ctx, 10)
				if err == nil && len(bs) == 1 {
					err = bs[0].Ack()
				}
				return err
			},
			check: func(t *testing.T, _ *queue.Queue, s *queue.Sorted[int64]) {
				_, err := s.TryPull(10)
				require.ErrorIs(t, err, queue.ErrEmpty)
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			gate := newWriteGate(nil)
			opts := queue.Options{FS: gate, ManualRequeue: true}
			var q *queue.Queue
			var s *queue.Sorted[int64]
			if c.sorted {
				var err error
				s, err = queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{Options: opts})
				require.NoError(t, err)
				defer s.Close()
			} else {
				q = open(t, t.TempDir(), &opts)
				defer q.Close()
			}
			if c.setup != nil {
				c.setup(t, q, s)
			}
			gate.arm()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.call(ctx, q, s) }()
			select {
			case <-gate.held: // the call's record is appended, its write under way
			case err := <-done:
				t.Fatalf("the call returned (%v) before its write", err)
			case <-time.After(30 * time.Second): // a hang detector
				t.Fatal("the call never wrote")
			}
			cancel()
			close(gate.freed)
			require.NoError(t, <-done, "the context ended after the record was appended")
			c.check(t, q, s)
		})
	}
}

// A call whose context has ended before it is made writes nothing and
// returns the context's error, as the README's Contexts guarantee says,
// even when it has something to do: a message ready for a delivery, a
// value pending for a pull.
func TestContextEndedBeforeWritesNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fs := faultfs.New(0)
	opts := queue.Options{FS: fs, ManualRequeue: true}
	testhook.SetManualCompaction(&opts)
	q := open(t, t.TempDir(), &opts)
	defer q.Close()
	enqueue(t, q, "ready")
	s, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{Options: opts})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(context.Background(), 1, "k", []byte("pending")))
	w, err := queue.OpenWindowed(t.TempDir(), &queue.WindowOptions{SortedOptions: queue.SortedOptions{Options: opts}, Window: time.Nanosecond})
	require.NoError(t, err)
	defer w.Close()
	step := countingStep(t, fs)
	for name, call := range map[string]func() error{
		"Enqueue":          func() error { _, err := q.Enqueue(ctx, []byte("v")); return err },
		"EnqueueBatch":     func() error { _, err := q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("v")}}); return err },
		"EnqueueAsync":     func() error { _, err := q.EnqueueAsync(ctx, []byte("v")); return err },
		"Dequeue":          func() error { _, err := q.Dequeue(ctx); return err },
		"DequeueBatch":     func() error { _, err := q.DequeueBatch(ctx, 10); return err },
		"Publish":          func() error { return s.Publish(ctx, 1, "k", []byte("v")) },
		"Pull":             func() error { _, err := s.Pull(ctx, 10); return err },
		"windowed Publish": func() error { return w.Publish(ctx, "k", []byte("v")) },
	} {
		require.ErrorIs(t, call(), context.Canceled, name)
		step(name, 0, 0)
	}
	s1, s2 := q.Stats(), s.Stats()
	require.EqualValues(t, 1, s1.Ready, "the ack queue holds its one message, ready")
	require.EqualValues(t, 1, s2.SortedPending, "the sorted queue its one value, pending")
}
