package redisq_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestLayout pins the stored layout (2): a message is three fields of
// one hash, and every key carries the layout in its name.
func TestLayout(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	q, err := redisq.Open(ctx, rdb, "pinned", nil)
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("x"), queue.WithID("a"))
	require.NoError(t, err)

	got, err := rdb.HMGet(ctx, "walq:{pinned}:2:msg", "1", "ia").Result()
	require.NoError(t, err)
	require.Equal(t, []any{"1:0::1:a", "1"}, got, "record (producer:deliveries:token:len:id) and id -> seq")
	body, err := rdb.HExists(ctx, "walq:{pinned}:2:msg", "b1").Result()
	require.NoError(t, err)
	require.True(t, body, "the body under b<seq>")
	ready, err := rdb.ZRange(ctx, "walq:{pinned}:2:ready", 0, -1).Result()
	require.NoError(t, err)
	require.Contains(t, ready, "1")
	n, err := rdb.Exists(ctx, "walq:{pinned}:seq", "walq:{pinned}:info", "walq:{pinned}:body", "walq:{pinned}:byid").Result()
	require.NoError(t, err)
	require.Zero(t, n, "no key of layout 1")
}

// TestOlderLayoutRefused: a queue that still holds the keys of layout 1
// (what an Enqueue of an older version leaves) is refused with ErrLayout,
// naming the key, and left as it was; once those keys are gone it opens.
// Queues of other names are not affected.
func TestOlderLayoutRefused(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	old := map[string]map[string]any{
		"info": {"1": "0:0::1:a"},
		"body": {"1": "x"},
		"byid": {"a": "1"},
	}
	require.NoError(t, rdb.Set(ctx, "walq:{old}:seq", 1, 0).Err())
	for k, fields := range old {
		require.NoError(t, rdb.HSet(ctx, "walq:{old}:"+k, fields).Err())
	}
	require.NoError(t, rdb.ZAdd(ctx, "walq:{old}:ready", redis.Z{Score: 1 << 52, Member: "1"}).Err())

	_, err := redisq.Open(ctx, rdb, "old", nil)
	require.ErrorIs(t, err, redisq.ErrLayout)
	require.ErrorContains(t, err, "walq:{old}:seq")
	body, err := rdb.HGet(ctx, "walq:{old}:body", "1").Result()
	require.NoError(t, err)
	require.Equal(t, "x", body, "the refused queue is left as it was")

	other, err := redisq.Open(ctx, rdb, "other", nil)
	require.NoError(t, err)
	require.NoError(t, other.Close())

	for _, k := range []string{"seq", "info", "body", "byid", "ready"} {
		require.NoError(t, rdb.Del(ctx, "walq:{old}:"+k).Err())
	}
	q, err := redisq.Open(ctx, rdb, "old", nil)
	require.NoError(t, err)
	defer q.Close()
	_, err = q.TryDequeue()
	require.ErrorIs(t, err, queue.ErrEmpty)
}

// TestSortedBatchLeaseLayout pins what a pull records of a batch apart
// from its record and copy, under the field "k" + lease token of the
// batch hash: the count of its values in decimal, ':', then the key's
// bytes as they are. The end of the batch removes it.
func TestSortedBatchLeaseLayout(t *testing.T) {
	rdb := redistest.Start(t).Client()
	s, b := pulledSorted(t, rdb, "lease-layout", redisq.Options{ManualRequeue: true}, "k\x00:\xc3\xa9", "v", "w")
	field := "k" + strconv.FormatUint(b.Receipt.Lease, 10)
	got, err := rdb.HGet(context.Background(), "walq:{lease-layout}:s:batch", field).Result()
	require.NoError(t, err)
	require.Equal(t, []byte{'2', ':', 'k', 0, ':', 0xc3, 0xa9}, []byte(got))
	require.NoError(t, b.Ack())
	require.Zero(t, rdb.HExists(context.Background(), "walq:{lease-layout}:s:batch", field).Val())
	require.Zero(t, s.Stats().SortedBatches)
}
