package redisq

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/walq/walq/internal/sortkey"
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

// TestSingleFlightRecordedBindsEarlierHandle: a handle without
// SingleFlight that opened before a handle with it recorded the setting
// keeps writing, and honours the recorded setting: its publish of a key
// with a batch out does not make the key pullable, its requeue of a dead
// value neither, and the key is pullable again once the batch is acked.
func TestSingleFlightRecordedBindsEarlierHandle(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	n, err := OpenSorted[int64](ctx, rdb, "mix", nil)
	require.NoError(t, err)
	defer n.Close()
	s, err := OpenSorted[int64](ctx, rdb, "mix", &SortedOptions{SingleFlight: true})
	require.NoError(t, err, "a single-flight handle opens on a queue a handle without it has open")
	defer s.Close()
	require.Equal(t, "1", rdb.HGet(ctx, s.keys[12], "single").Val())

	require.NoError(t, s.Publish(ctx, 1, "k", []byte("one")))
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.NoError(t, n.Publish(ctx, 2, "k", []byte("two")))
	got, err := n.TryPull(10)
	require.ErrorIs(t, err, queue.ErrEmpty, "k leased twice after a publish of the earlier handle: %v", got)

	require.NoError(t, s.Publish(ctx, 3, "d", []byte("dead")))
	ds, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.NoError(t, ds[0].DeadLetter("p"))
	require.NoError(t, s.Publish(ctx, 4, "d", []byte("next")))
	out, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, out, 1)
	dead, err := n.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.NoError(t, n.RequeueDeadValue(dead[0]))
	got, err = n.TryPull(10)
	require.ErrorIs(t, err, queue.ErrEmpty, "d leased twice after a requeue of the earlier handle: %v", got)

	require.NoError(t, bs[0].Ack())
	again, err := n.TryPull(10)
	require.NoError(t, err, "k is pullable once its batch is acked")
	require.Len(t, again, 1)
	require.Equal(t, "k", again[0].Key)
}

// TestSingleFlightGarbageRefused: a "single" field that holds neither 0
// nor 1 refuses every writing handle, quoting what it holds and what to
// set.
func TestSingleFlightGarbageRefused(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s, err := OpenSorted[int64](ctx, rdb, "g", &SortedOptions{SingleFlight: true})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, rdb.HSet(ctx, s.keys[12], "single", "true").Err())
	for _, single := range []bool{false, true} {
		_, err = OpenSorted[int64](ctx, rdb, "g", &SortedOptions{SingleFlight: single})
		require.ErrorIs(t, err, queue.ErrInvalidOptions, "SingleFlight %v", single)
		require.ErrorContains(t, err, `holds "true" in the field single`)
		require.ErrorContains(t, err, "HSET "+s.keys[12]+" single 1")
		require.ErrorContains(t, err, "HSET "+s.keys[12]+" single 0")
		require.NotContains(t, err.Error(), "SingleFlight false, this handle's is false")
	}
}

// TestSingleFlightSurvivesDrainPurge: acking every batch and purging
// every dead value leave the setting recorded.
func TestSingleFlightSurvivesDrainPurge(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s, err := OpenSorted[int64](ctx, rdb, "dr", &SortedOptions{SingleFlight: true})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "k", []byte("one")))
	require.NoError(t, s.Publish(ctx, 2, "j", []byte("two")))
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 2)
	for _, b := range bs {
		if b.Key == "k" {
			require.NoError(t, b.DeadLetter("p"))
		} else {
			require.NoError(t, b.Ack())
		}
	}
	n, err := s.PurgeAllDead()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "1", rdb.HGet(ctx, s.keys[12], "single").Val())
	_, err = OpenSorted[int64](ctx, rdb, "dr", nil)
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
}

// TestSingleFlightEarlierVersion: on a queue that records SingleFlight,
// a handle of an earlier version (its own library, which follows the
// handle's own setting) without it publishes to a key with a batch out
// and puts the key back in the pull order. This version's pull does not
// lease the key again, and leases it once the batch is acked; an earlier
// version's pull, even with SingleFlight, leases it twice, which is why
// every handle of an earlier version needs SingleFlight (README).
func TestSingleFlightEarlierVersion(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	require.NoError(t, rdb.FunctionLoadReplace(ctx, previousSortedLibrary).Err())
	s, err := OpenSorted[int64](ctx, rdb, "up", &SortedOptions{SingleFlight: true})
	require.NoError(t, err)
	defer s.Close()
	previous := func(single, op string, args ...any) any {
		t.Helper()
		argv := append([]any{s.wake, unixMicros(time.Now()), s.o.MaxDeliveries, single, micros(s.o.AckTimeout), "1", op}, args...)
		v, err := rdb.FCall(ctx, previousSortedName+"_grow", s.keys, argv...).Result()
		require.NoError(t, err)
		return v
	}
	publish := func(sort int64, payload string) {
		t.Helper()
		part := sortkey.OrderedInt(sort)
		b, err := msgpack.Marshal(&sortedValue{Sort: part, At: time.Now().UnixNano(), Payload: []byte(payload)})
		require.NoError(t, err)
		previous("0", "publish", "k", part, b)
	}
	require.NoError(t, s.Publish(ctx, 1, "k", []byte("one")))
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	publish(2, "two")
	got, err := s.TryPull(10)
	require.ErrorIs(t, err, queue.ErrEmpty, "k leased twice after an earlier version's publish: %v", got)
	require.NoError(t, bs[0].Ack())
	again, err := s.TryPull(10)
	require.NoError(t, err, "k is pullable once its batch is acked")
	require.Len(t, again, 1)
	require.Equal(t, []byte("two"), again[0].Values[0].Payload)

	publish(3, "three")
	r, _ := previous("1", "pull", 10, "", "77").([]any)
	twice, _ := r[0].([]any)
	require.Len(t, twice, 1, "an earlier version's pull leases k a second time")
}
