package redisq

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestSingleFlightRequeueFromOtherHandle: a single-flight queue records
// its setting; a writing handle without SingleFlight is refused, so no
// handle's requeue of a dead value makes a key with a batch out
// pullable; a reader opens; a queue that records none (an earlier
// version's) takes a handle without and is recorded by one with.
func TestSingleFlightRequeueFromOtherHandle(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s, err := OpenSorted[int64](ctx, rdb, "sf", &SortedOptions{SingleFlight: true})
	require.NoError(t, err)
	defer s.Close()
	_, err = OpenSorted[int64](ctx, rdb, "sf", nil)
	require.ErrorIs(t, err, queue.ErrInvalidOptions, "a writing handle without SingleFlight")
	r, err := OpenSorted[int64](ctx, rdb, "sf", &SortedOptions{Options: Options{ReadOnly: true}})
	require.NoError(t, err, "a reader")
	require.NoError(t, r.Close())
	o, err := OpenSorted[int64](ctx, rdb, "sf", &SortedOptions{SingleFlight: true})
	require.NoError(t, err)
	defer o.Close()
	require.NoError(t, s.Publish(ctx, 1, "k", []byte("one")))
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.NoError(t, bs[0].DeadLetter("p"))
	require.NoError(t, s.Publish(ctx, 2, "k", []byte("two")))
	_, err = s.TryPull(10)
	require.NoError(t, err)
	ds, err := o.DeadValues(0, 0)
	require.NoError(t, err)
	require.NoError(t, o.RequeueDeadValue(ds[0]))
	_, err = s.TryPull(10)
	require.ErrorIs(t, err, queue.ErrEmpty, "k leased twice under SingleFlight")

	// A queue that records no setting.
	require.NoError(t, rdb.HDel(ctx, s.keys[12], "single").Err())
	w, err := OpenSorted[int64](ctx, rdb, "sf", nil)
	require.NoError(t, err, "a queue that records none takes a handle without SingleFlight")
	require.NoError(t, w.Close())
	require.False(t, rdb.HExists(ctx, s.keys[12], "single").Val(), "a handle without SingleFlight records nothing")
	o2, err := OpenSorted[int64](ctx, rdb, "sf", &SortedOptions{SingleFlight: true})
	require.NoError(t, err)
	require.NoError(t, o2.Close())
	_, err = OpenSorted[int64](ctx, rdb, "sf", nil)
	require.ErrorIs(t, err, queue.ErrInvalidOptions, "recorded by the handle with SingleFlight")

	// A queue set by hand to no single flight refuses a handle with it.
	require.NoError(t, rdb.HSet(ctx, s.keys[12], "single", "0").Err())
	_, err = OpenSorted[int64](ctx, rdb, "sf", &SortedOptions{SingleFlight: true})
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
	ww, err := OpenWindowed(ctx, rdb, "sfw", &WindowOptions{SortedOptions: SortedOptions{SingleFlight: true}, Window: time.Second})
	require.NoError(t, err)
	defer ww.Close()
	_, err = OpenWindowed(ctx, rdb, "sfw", &WindowOptions{Window: time.Second})
	require.ErrorIs(t, err, queue.ErrInvalidOptions, "a windowed queue records it too")
}
