package redisq

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestLostMsgNotPromoted: the msg hash of a queue whose only message is
// delayed is deleted; once that message falls due, a lone dequeue finds
// ready empty. It must report the lost key before it writes: not first
// promote the message (delayed to ready, '#w' written to a new msg)
// and only then find its record missing.
func TestLostMsgNotPromoted(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	q, err := Open(ctx, rdb, "lostmsg-due", &Options{ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("later"), queue.WithDelay(300*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, rdb.Del(ctx, q.keys[1]).Err())
	time.Sleep(400 * time.Millisecond)
	before := keyContents(t, rdb, q.keys)
	_, err = q.TryDequeue()
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.ErrorContains(t, err, "queue key "+q.keys[1]+" was deleted")
	require.Equal(t, before, keyContents(t, rdb, q.keys), "the refused dequeue wrote nothing")
}

// TestLostLeaseNotPromoted: the lease set of a queue holding a ready
// message and a delayed one is deleted; once the delayed one falls due,
// a lone dequeue must report the lost key before it writes: not first
// promote the due message (delayed to ready, '#w') and only then find
// lease's placeholder missing.
func TestLostLeaseNotPromoted(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	q, err := Open(ctx, rdb, "lostlease-due", &Options{ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("later"), queue.WithDelay(300*time.Millisecond))
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("now"))
	require.NoError(t, err)
	require.NoError(t, rdb.Del(ctx, q.keys[4]).Err())
	time.Sleep(400 * time.Millisecond)
	before := keyContents(t, rdb, q.keys)
	_, err = q.TryDequeue()
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.ErrorContains(t, err, "queue key "+q.keys[4]+" was deleted")
	require.Equal(t, before, keyContents(t, rdb, q.keys), "the refused dequeue wrote nothing")
}
