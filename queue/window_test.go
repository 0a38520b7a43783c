package queue

import (
	"context"
	"fmt"
	"testing"
)

// The records of asynchronous calls in flight never exceed MaxPending:
// checked after every call, under the lock the window is kept with.
func TestMaxPendingBoundsInFlight(t *testing.T) {
	for _, window := range []int{1, 8, 64} {
		t.Run(fmt.Sprint(window), func(t *testing.T) {
			q, err := Open(t.TempDir(), &Options{MaxPending: window})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			ctx, peak := context.Background(), 0
			for i := range 500 {
				if _, err := q.EnqueueAsync(ctx, []byte{byte(i)}); err != nil {
					t.Fatal(err)
				}
				q.mu.Lock()
				n := q.mu.async.records
				q.mu.Unlock()
				if n > window {
					t.Fatalf("after call %d: %d records in flight, MaxPending %d", i, n, window)
				}
				peak = max(peak, n)
			}
			if err := q.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			q.mu.Lock()
			q.mu.async.reap()
			left := q.mu.async.records
			q.mu.Unlock()
			if left != 0 {
				t.Fatalf("%d records still in flight after Flush", left)
			}
			t.Logf("peak in flight %d of %d", peak, window)
		})
	}
}
