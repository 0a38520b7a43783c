package queue_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
)

// TestConformance runs the engine-independent suite against the embedded
// queue: a fresh directory per subtest; another handle is the same
// directory closed and opened again.
func TestConformance(t *testing.T) {
	queuetest.TestAckQueue(t, queuetest.Engine{
		Open: func(t *testing.T, o queuetest.Options) (queue.AckQueue, func() queue.AckQueue) {
			dir := t.TempDir()
			opts := &queue.Options{AckTimeout: o.AckTimeout, MaxDeliveries: o.MaxDeliveries,
				DedupWindow: o.DedupWindow, Clock: o.Clock, ManualRequeue: true, Sync: queue.SyncNever}
			q, err := queue.Open(dir, opts)
			require.NoError(t, err)
			return q, func() queue.AckQueue {
				require.NoError(t, q.Close())
				q2, err := queue.Open(dir, opts)
				require.NoError(t, err)
				return q2
			}
		},
	})
}

// TestSortedConformance runs the suite of sorted and windowed queues
// against the embedded ones.
func TestSortedConformance(t *testing.T) {
	opts := func(o queuetest.SortedOptions) queue.SortedOptions {
		return queue.SortedOptions{SingleFlight: o.SingleFlight, Options: queue.Options{AckTimeout: o.AckTimeout,
			MaxDeliveries: o.MaxDeliveries, Clock: o.Clock, ManualRequeue: true, Sync: queue.SyncNever}}
	}
	var mu sync.Mutex
	dirs := map[queue.SortedQueue[int64]]string{}
	queuetest.TestSorted(t, queuetest.SortedEngine{
		Open: func(t *testing.T, o queuetest.SortedOptions) queue.SortedQueue[int64] {
			so := opts(o)
			dir := t.TempDir()
			q, err := queue.OpenSorted[int64](dir, &so)
			require.NoError(t, err)
			mu.Lock()
			dirs[q] = dir
			mu.Unlock()
			return q
		},
		OpenReadOnly: func(t *testing.T, q queue.SortedQueue[int64]) queue.SortedQueue[int64] {
			mu.Lock()
			dir := dirs[q]
			mu.Unlock()
			require.NoError(t, q.Close())
			r, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: queue.Options{ReadOnly: true}})
			require.NoError(t, err)
			return r
		},
		OpenWindowed: func(t *testing.T, o queuetest.SortedOptions) queue.WindowedQueue {
			q, err := queue.OpenWindowed(t.TempDir(), &queue.WindowOptions{SortedOptions: opts(o), Window: o.Window})
			require.NoError(t, err)
			return q
		},
	})
}
