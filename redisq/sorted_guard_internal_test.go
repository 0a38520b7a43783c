package redisq

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq/internal/redistest"
)

// pullBound is how long tryPullBounded waits for a pull: far above what a
// pull takes on a loaded machine, so only a pull that loops reaches it.
const pullBound = 30 * time.Second

// tryPullBounded is TryPull that fails the test, instead of hanging, when
// the pull script does not end: a script that loops blocks the whole
// server (every client gets BUSY) until it is killed.
func tryPullBounded[K queue.SortKey](t *testing.T, rdb *redis.Client, s *Sorted[K], max int) ([]*queue.Batch[K], error) {
	t.Helper()
	type res struct {
		bs  []*queue.Batch[K]
		err error
	}
	done := make(chan res, 1)
	go func() {
		bs, err := s.TryPull(max)
		done <- res{bs, err}
	}()
	select {
	case r := <-done:
		return r.bs, r.err
	case <-time.After(pullBound):
		err := rdb.Ping(context.Background()).Err()
		_ = rdb.Do(context.Background(), "FUNCTION", "KILL").Err()
		<-done
		t.Fatalf("the pull did not end within %v (another client's PING: %v)", pullBound, err)
		return nil, nil
	}
}

// TestSortedStrayOrderMember: a member of the pull order that names no
// key's place (added by hand or by a faulty client: a string sort part
// without its terminator, a fixed one too short, a key with no values;
// but not a key's member that its pos entry lost) is
// dropped by the pull, which delivers the real keys: it neither loops
// (blocking the server), nor leases an empty batch, nor runs out of lease
// tokens. A pending member too short to end in a seq is dropped too, and
// its key's values are delivered.
func TestSortedStrayOrderMember(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	require.NoError(t, rdb.ConfigSet(ctx, "busy-reply-threshold", "100").Err())

	t.Run("string", func(t *testing.T) {
		s, err := OpenSorted[string](ctx, rdb, "stray-string", &SortedOptions{Options: Options{ManualRequeue: true}})
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, s.Publish(ctx, "x", "k1", []byte("v1")))
		require.NoError(t, s.Publish(ctx, "y", "k1", []byte("v2")))
		require.NoError(t, rdb.ZAdd(ctx, s.keys[5], redis.Z{Member: "\x00\x00\x00"}, redis.Z{Member: "\x00\x02"}).Err())
		bs, err := tryPullBounded(t, rdb, s, 10)
		require.NoError(t, err)
		require.Len(t, bs, 1)
		require.Equal(t, "k1", bs[0].Key)
		require.Len(t, bs[0].Values, 2)
		require.NoError(t, bs[0].Ack())
		n, err := rdb.ZCard(ctx, s.keys[5]).Result()
		require.NoError(t, err)
		require.Zero(t, n, "the strays are gone")
	})
	t.Run("fixed", func(t *testing.T) {
		s, err := OpenSorted[int64](ctx, rdb, "stray-fixed", &SortedOptions{Options: Options{ManualRequeue: true}})
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, s.Publish(ctx, 5, "k1", []byte("v1")))
		require.NoError(t, rdb.ZAdd(ctx, s.keys[5], redis.Z{Member: "abc"}, redis.Z{Member: "\x00\x00\x00\x00\x00\x00\x00\x00zz"},
			redis.Z{Member: "\x00\x00\x00\x00\x00\x00\x00\x01"}).Err())
		bs, err := tryPullBounded(t, rdb, s, 1)
		require.NoError(t, err)
		require.Len(t, bs, 1)
		require.Equal(t, "k1", bs[0].Key)
		require.Equal(t, []byte("v1"), bs[0].Values[0].Payload)
		require.Equal(t, 1, s.Stats().SortedBatches, "no empty batch leased")
		require.NoError(t, bs[0].Ack())
	})
	t.Run("place lost", func(t *testing.T) { // pos lost the key: the member still reads as its place
		s, err := OpenSorted[string](ctx, rdb, "stray-pos", &SortedOptions{Options: Options{ManualRequeue: true}})
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, s.Publish(ctx, "x", "k1", []byte("v1")))
		require.NoError(t, rdb.HDel(ctx, s.keys[6], "k1").Err())
		bs, err := tryPullBounded(t, rdb, s, 10)
		require.NoError(t, err)
		require.Len(t, bs, 1)
		require.Equal(t, []byte("v1"), bs[0].Values[0].Payload)
		require.NoError(t, bs[0].Ack())
	})
	t.Run("pending", func(t *testing.T) {
		s, err := OpenSorted[int64](ctx, rdb, "stray-pend", &SortedOptions{Options: Options{ManualRequeue: true}})
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, s.Publish(ctx, 5, "k1", []byte("v1")))
		require.NoError(t, rdb.ZAdd(ctx, s.keys[4], redis.Z{Member: "\x00\x02k1x"}).Err())
		bs, err := tryPullBounded(t, rdb, s, 10)
		require.NoError(t, err)
		require.Len(t, bs, 1)
		require.Len(t, bs[0].Values, 1)
		require.Equal(t, []byte("v1"), bs[0].Values[0].Payload)
		require.NoError(t, bs[0].Ack())
		st := s.Stats()
		require.Equal(t, [3]int{0, 0, 0}, [3]int{st.SortedPending, st.SortedBatches, st.SortedDead})
	})
}

// TestSortedGarbledBatchBack: a leased batch whose record was garbled
// still settles by its receipt, and when its lease runs out its values go
// back to their key (which, under single flight, is pullable again):
// a batch's values are named only by its lease, which keeps a second
// copy of the record.
func TestSortedGarbledBatchBack(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	clock := queuetest.NewClock()
	s, err := OpenSorted[int64](ctx, rdb, "garbled-batch", &SortedOptions{SingleFlight: true,
		Options: Options{Clock: clock, AckTimeout: time.Minute, ManualRequeue: true}})
	require.NoError(t, err)
	defer s.Close()
	for i, k := range []string{"k1", "k1", "k2"} {
		require.NoError(t, s.Publish(ctx, int64(i), k, []byte(k+strconv.Itoa(i))))
	}
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 2)
	for _, b := range bs {
		require.NoError(t, rdb.HSet(ctx, s.keys[7], strconv.FormatUint(b.Receipt.Lease, 10), "\xc1").Err())
	}
	require.NoError(t, bs[1].Ack(), "k2's batch acks by its receipt")
	clock.Advance(2 * time.Minute)
	n, err := s.RequeueExpired()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	bs, err = s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1, "k1 is back")
	require.Equal(t, "k1", bs[0].Key)
	require.Len(t, bs[0].Values, 2)
	require.Equal(t, 2, bs[0].Values[0].Deliveries)
	require.NoError(t, bs[0].Ack())
	st := s.Stats()
	require.Equal(t, [4]int{0, 0, 0, 0}, [4]int{st.SortedPending, st.SortedBatches, st.SortedDead, st.SortedLeased})
}

// TestSortedKeyKind: a sorted queue records the kind of its sort keys
// when it is made, and a handle of another kind is refused at Open. A
// queue made before the kind was recorded refuses such a handle's pull
// before anything is leased, and the handle of its kind goes on.
func TestSortedKeyKind(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s, err := OpenSorted[string](ctx, rdb, "kind", nil)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, "a", "k1", []byte("v1")))

	_, err = OpenSorted[int64](ctx, rdb, "kind", nil)
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
	_, err = OpenSorted[float64](ctx, rdb, "kind", nil)
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
	_, err = OpenWindowed(ctx, rdb, "kind", &WindowOptions{Window: time.Second})
	require.ErrorIs(t, err, queue.ErrInvalidOptions)

	require.NoError(t, rdb.HDel(ctx, s.keys[12], "kind").Err()) // as a queue of an earlier version
	o, err := OpenSorted[int64](ctx, rdb, "kind", nil)
	require.NoError(t, err)
	defer o.Close()
	_, err = tryPullBounded(t, rdb, o, 10)
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
	st := s.Stats()
	require.Equal(t, [3]int{1, 1, 0}, [3]int{st.SortedPending, st.SortedKeys, st.SortedBatches}, "nothing leased")
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.Equal(t, "a", bs[0].Values[0].Sort)
	require.NoError(t, bs[0].Ack())
}

// TestSortedKeyKindOldIntQueue: on an int queue of an earlier version
// (no kind recorded), a string handle's pull is refused before it leases
// anything, also for int sort keys whose 8 bytes hold a 00 01 (1, 256):
// read as a string sort part, the bytes before it are not validly
// escaped (a 00 not followed by FF), so they are no string's part.
func TestSortedKeyKindOldIntQueue(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	o, err := OpenSorted[int64](ctx, rdb, "kind-int", nil)
	require.NoError(t, err)
	defer o.Close()
	require.NoError(t, o.Publish(ctx, 1, "k1", []byte("v1")))
	require.NoError(t, o.Publish(ctx, 256, "k2", []byte("v2")))
	require.NoError(t, rdb.HDel(ctx, o.keys[12], "kind").Err()) // as a queue of an earlier version

	s, err := OpenSorted[string](ctx, rdb, "kind-int", nil)
	require.NoError(t, err)
	defer s.Close()
	bs, err := tryPullBounded(t, rdb, s, 10)
	require.ErrorIs(t, err, queue.ErrInvalidOptions, "got %d batches", len(bs))
	st := o.Stats()
	require.Equal(t, [3]int{2, 2, 0}, [3]int{st.SortedPending, st.SortedKeys, st.SortedBatches}, "nothing leased")
	ibs, err := o.TryPull(10)
	require.NoError(t, err)
	require.Len(t, ibs, 2)
	require.Equal(t, [2]int64{1, 256}, [2]int64{ibs[0].Values[0].Sort, ibs[1].Values[0].Sort})
	for _, b := range ibs {
		require.NoError(t, b.Ack())
	}
}

// farTimers is farClock whose timers are real: a pull that computes a
// due time already passed wakes at once, as with the system clock.
type farTimers struct{ *farClock }

func (farTimers) After(d time.Duration) <-chan time.Time { return time.After(d) }

// TestWindowedFarClock: a windowed queue whose clock is past the last
// time a sort key holds (2262) plus its window takes every key as due
// (the bound saturates, as the embedded queue's), so a value published
// earlier is pulled, and a blocking Pull returns it rather than looping
// on a due time that has passed.
func TestWindowedFarClock(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	var pulls atomic.Int64
	rdb.AddHook(&fcallFaults{seen: func(fn string, args []any, _ error) {
		if isCall(fn, args, "grow", "pull") {
			pulls.Add(1)
		}
	}})
	clock := &farClock{t: time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)}
	w, err := OpenWindowed(ctx, rdb, "far-window", &WindowOptions{Window: time.Hour,
		SortedOptions: SortedOptions{Options: Options{Clock: farTimers{clock}, ManualRequeue: true}}})
	require.NoError(t, err)
	defer w.Close()
	require.NoError(t, w.Publish(ctx, "k1", []byte("v1")))
	clock.add(365 * 24 * time.Hour)
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	bs, err := w.Pull(pctx, 10)
	require.NoError(t, err, "after %d pull calls", pulls.Load())
	require.Len(t, bs, 1)
	require.Equal(t, []byte("v1"), bs[0].Values[0].Payload)
	require.NoError(t, bs[0].Ack())
	require.LessOrEqual(t, pulls.Load(), int64(2))

	_, err = w.TryPull(10)
	require.True(t, errors.Is(err, queue.ErrEmpty), "%v", err)
}
