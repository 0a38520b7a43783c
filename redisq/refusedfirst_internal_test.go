package redisq

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestRefusedFirstEnqueueLeavesNoLostKey: a queue's first enqueue
// refused on a key of the wrong type leaves some placeholders written
// and others not (this version writes ready's, lease's, then msg's; the
// release 5a7e6e2 msg's, then ready's and lease's) and its seq taken
// back. Once the operator deletes the spoiled key, as the error says,
// the queue is new and empty: nothing was lost, so Open, Stats, a
// batch enqueue and a dequeue must run, not report a deleted key.
func TestRefusedFirstEnqueueLeavesNoLostKey(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	require.NoError(t, rdb.FunctionLoad(ctx, unguardedLibrary).Err())
	for _, c := range []struct {
		name    string
		spoiled int  // position in keys of the key set to the wrong type
		earlier bool // the first enqueue is 5a7e6e2's
	}{
		{"this/lease", 4, false},
		{"this/msg", 1, false},
		{"5a7e6e2/ready", 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "refused-first-" + c.name
			q, err := Open(ctx, rdb, name, &Options{ManualRequeue: true})
			require.NoError(t, err)
			defer q.Close()
			spoiled := q.keys[c.spoiled]
			require.NoError(t, rdb.Set(ctx, spoiled, "x", 0).Err())
			if c.earlier {
				err = rdb.FCall(ctx, unguardedName+"_enqueue1", fnEnqueue1.pick(q.keys), "old-1", "body").Err()
			} else {
				_, err = q.Enqueue(ctx, []byte("refused"))
			}
			require.ErrorContains(t, err, "WRONGTYPE")
			seq, err := rdb.Get(ctx, q.keys[0]).Result()
			require.NoError(t, err)
			require.Equal(t, "0", seq, "the refused enqueue took its seq back")
			require.NoError(t, rdb.Del(ctx, spoiled).Err())

			q2, err := Open(ctx, rdb, name, &Options{ManualRequeue: true})
			require.NoError(t, err, "Open of the repaired, empty queue")
			defer q2.Close()
			_, err = q2.StatsContext(ctx)
			require.NoError(t, err, "stats of the repaired, empty queue")
			_, err = q2.TryDequeue()
			require.ErrorIs(t, err, queue.ErrEmpty, "a dequeue of the repaired, empty queue")
			_, err = q2.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("a")}, {Payload: []byte("b")}})
			require.NoError(t, err, "a batch on the repaired, empty queue")
			m, err := q2.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, uint64(1), m.Receipt.Seq)
			require.NoError(t, m.Ack())
		})
	}
}
