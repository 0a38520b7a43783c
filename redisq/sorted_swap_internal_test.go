package redisq

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// A single-flight batch's record overwritten (by hand) with another
// batch's record, which decodes and checks out, while the lease the pull
// recorded still names the batch's own key: the batch's end must lower
// its own key's count of leased batches, not the other key's (which
// would then be leased a second time while its batch is out, and the own
// key never be pullable again).
func TestSortedRecordOfAnotherBatch(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	s, err := OpenSorted[int64](ctx, rdb, "swap", &SortedOptions{SingleFlight: true, Options: Options{AckTimeout: time.Minute}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "k", []byte("k1")))
	require.NoError(t, s.Publish(ctx, 2, "j", []byte("j1")))
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 2)
	var bk, bj *queue.Batch[int64]
	for _, b := range bs {
		if b.Key == "k" {
			bk = b
		} else {
			bj = b
		}
	}
	tk, tj := strconv.FormatUint(bk.Receipt.Lease, 10), strconv.FormatUint(bj.Receipt.Lease, 10)
	jrec := rdb.HGet(ctx, s.keys[7], tj).Val()
	require.NoError(t, rdb.HSet(ctx, s.keys[7], tk, jrec).Err())
	require.NoError(t, bk.Nack(0))
	require.NoError(t, s.Publish(ctx, 3, "j", []byte("j2")))
	require.NoError(t, s.Publish(ctx, 4, "k", []byte("k2")))
	got, err := s.TryPull(10)
	keys := []string{}
	for _, b := range got {
		keys = append(keys, b.Key)
	}
	t.Logf("flight %v, pulled %v (err %v)", rdb.HGetAll(ctx, s.keys[9]).Val(), keys, err)
	require.NotContains(t, keys, "j", "j leased a second time while its batch is out")
	require.Contains(t, keys, "k", "k stays out after its batch ended")
}
