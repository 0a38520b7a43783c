package redisq

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// A deadline announced before the housekeeper has armed its timer (while
// its first pass runs) must wake it: that pass may have read the server
// before the deadline was set, and would then sleep for idleRecheck.
func TestAnnouncedBeforeArmed(t *testing.T) {
	h := newHandle(nil, nil, "", Options{})
	h.announced("t" + unixMicros(time.Now().Add(time.Hour)))
	select {
	case <-h.kick:
	default:
		t.Fatal("a deadline announced before the first pass armed the timer did not wake the housekeeper")
	}
}

// TestHousekeepNewQueueCreatesNoKey: a housekeeping pass and a dequeue
// over a new queue, nothing enqueued and nothing delayed, create no key:
// a queue no one has written to stays absent from the server.
func TestHousekeepNewQueueCreatesNoKey(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	q, err := Open(ctx, rdb, "untouched", &Options{TrustServer: true, ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.RequeueExpired()
	require.NoError(t, err)
	n, err := rdb.Exists(ctx, q.keys...).Result()
	require.NoError(t, err)
	require.Zero(t, n, "a housekeeping pass over a new queue creates no key")
	_, err = q.TryDequeue()
	require.ErrorIs(t, err, queue.ErrEmpty)
	n, err = rdb.Exists(ctx, q.keys...).Result()
	require.NoError(t, err)
	require.Zero(t, n, "a dequeue from a new queue creates no key")
}
