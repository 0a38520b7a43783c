package redisq_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestSortedDeadFreesPayloads: a purged dead value leaves nothing behind
// in the server (payload, delivery count, reason, recorded key), and a
// requeued one leaves no trace of having been dead; an ack then frees the
// requeued value too.
func TestSortedDeadFreesPayloads(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s, err := redisq.OpenSorted[int64](ctx, rdb, "dead-frees", nil)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "k", []byte("v1")))
	require.NoError(t, s.Publish(ctx, 2, "k", []byte("v2")))
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.NoError(t, bs[0].DeadLetter("why"))
	lens := func() [4]int64 {
		t.Helper()
		var out [4]int64
		for i, k := range []string{"val", "vinfo", "vreason", "dead"} {
			key := "walq:{dead-frees}:s:" + k
			typ, err := rdb.Type(ctx, key).Result()
			require.NoError(t, err)
			if typ == "zset" {
				out[i], err = rdb.ZCard(ctx, key).Result()
			} else {
				out[i], err = storedFields(ctx, rdb, key)
			}
			require.NoError(t, err)
		}
		return out
	}
	require.Equal(t, [4]int64{2, 2, 4, 2}, lens(), "two dead values: payload, count, reason and key each")
	ds, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, 2)
	require.NoError(t, s.PurgeDeadValue(ds[0]))
	require.NoError(t, s.RequeueDeadValue(ds[1]))
	require.Equal(t, [4]int64{1, 1, 0, 0}, lens(), "the purged value is gone; the requeued one is pending")
	bs, err = s.TryPull(10)
	require.NoError(t, err)
	require.Equal(t, []byte("v2"), bs[0].Values[0].Payload)
	require.NoError(t, bs[0].Ack())
	require.Equal(t, [4]int64{0, 0, 0, 0}, lens())
}
