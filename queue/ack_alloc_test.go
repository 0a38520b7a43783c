package queue_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// TestAckAllocatesNothing pins the allocations of an Ack in steady state,
// under each sync mode: the ack record, its commit group and the queue's
// clock reading reuse what the queue holds, so a run of acks allocates
// far less than one object per ack. The acks are more than the wall
// clock's resync apart, as under SyncAlways on a disk whose fsync takes a
// millisecond or at a low rate, so each one reads the clock anew. The
// committer's and the housekeeper's allocations meanwhile count too: the
// bound is one per four acks. Before, each such ack allocated the clock's
// new base.
func TestAckAllocatesNothing(t *testing.T) {
	const acks = 200
	ctx := context.Background()
	for _, mode := range []struct {
		name string
		sync queue.SyncMode
	}{{"never", queue.SyncNever}, {"always", queue.SyncAlways}} {
		t.Run(mode.name, func(t *testing.T) {
			q, err := queue.Open(t.TempDir(), &queue.Options{Sync: mode.sync})
			require.NoError(t, err)
			defer q.Close()
			payload := make([]byte, 100)
			ms := make([]*queue.Message, acks)
			for i := range ms {
				_, err := q.Enqueue(ctx, payload)
				require.NoError(t, err)
				ms[i], err = q.Dequeue(ctx)
				require.NoError(t, err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for _, m := range ms {
				time.Sleep(2 * time.Millisecond)
				if err := m.Ack(); err != nil {
					t.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			t.Logf("%d allocations over %d acks", after.Mallocs-before.Mallocs, acks)
			require.Less(t, after.Mallocs-before.Mallocs, uint64(acks/4), "allocations of %d acks", acks)
		})
	}
}
