package redisq

import (
	"context"
	_ "embed"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// The library of the release before the check of a lost seq counter
// (5a7e6e2), as FUNCTION LOAD takes it. Its keep writes msg's
// placeholder first, then those of ready and lease.
var (
	//go:embed testdata/library-5a7e6e2.lua
	unguardedLibrary string
)

const unguardedName = "walq_d16019665bd98d8b"

// TestFirstEnqueueAfterUnguardedRefusal: a handle of 5a7e6e2 refuses a
// queue's first enqueue on a lease key of the wrong type after writing
// msg's placeholder, and takes its seq back to 0. Once the operator
// deletes that key, as the error says, the queue is new and empty: no
// message holds a seq. An enqueue of this version must run (seq 1), not
// take the placeholder for a lost counter and refuse every enqueue with
// ErrCorrupt until the operator sets a counter that was never lost.
func TestFirstEnqueueAfterUnguardedRefusal(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	require.NoError(t, rdb.FunctionLoad(ctx, unguardedLibrary).Err())
	for _, batch := range []bool{false, true} {
		t.Run("batch="+strconv.FormatBool(batch), func(t *testing.T) {
			q, err := Open(ctx, rdb, "unguarded-refused-"+strconv.FormatBool(batch), &Options{ManualRequeue: true})
			require.NoError(t, err)
			defer q.Close()
			lease := q.keys[4]
			require.NoError(t, rdb.Set(ctx, lease, "x", 0).Err())
			err = rdb.FCall(ctx, unguardedName+"_enqueue1", fnEnqueue1.pick(q.keys), "old-1", "body").Err()
			require.ErrorContains(t, err, "WRONGTYPE", "the earlier release refuses the first enqueue")
			seq, err := rdb.Get(ctx, q.keys[0]).Result()
			require.NoError(t, err)
			require.Equal(t, "0", seq, "its seq taken back")
			require.NoError(t, rdb.Del(ctx, lease).Err())

			if batch {
				_, err = q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("a")}, {Payload: []byte("b")}})
			} else {
				_, err = q.Enqueue(ctx, []byte("a"))
			}
			require.NoError(t, err, "an enqueue on the repaired, empty queue")
			m, err := q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, uint64(1), m.Receipt.Seq)
			require.Equal(t, "a", string(m.Payload))
			require.NoError(t, m.Ack())
		})
	}
}

// TestSeqKeyLostDrained: a queue that held messages, all acked, whose
// counter is then deleted still refuses an enqueue (doc.go: "holds
// messages, or did"), the lone and the batched alike: what tells a lost
// counter from a new queue must not be a live message.
func TestSeqKeyLostDrained(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	q, err := Open(ctx, rdb, "seqlost-drained", &Options{ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("a"))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.Ack())
	require.NoError(t, rdb.Del(ctx, q.keys[0]).Err())

	_, err = q.Enqueue(ctx, []byte("b"))
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.ErrorContains(t, err, "and to at least 1 ", "msg holds no seq: the value to restore")
	_, err = q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("b")}, {Payload: []byte("c")}})
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.NoError(t, rdb.Set(ctx, q.keys[0], 1, 0).Err())
	_, err = q.Enqueue(ctx, []byte("b"))
	require.NoError(t, err)
	m, err = q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, uint64(2), m.Receipt.Seq)
	require.NoError(t, m.Ack())
}
