package redisq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// sortedKeyNames are the key names of a sorted or windowed queue, after
// walq:{NAME}:s:.
var sortedKeyNames = []string{"seq", "val", "vinfo", "vreason", "pend", "order", "pos", "batch", "bdue", "flight", "hold", "dead", "stats", "age"}

// openLostForm opens the sorted or windowed ("windowed") queue name on
// rdb, as a handle of time sort keys, and a function that publishes to it.
func openLostForm(ctx context.Context, srv *redistest.Server, form, name string) (*redisq.Sorted[time.Time], func(string) error, error) {
	o := redisq.Options{AckTimeout: time.Minute, ManualRequeue: true}
	if form == "windowed" {
		w, err := redisq.OpenWindowed(ctx, srv.Client(), name, &redisq.WindowOptions{Window: time.Nanosecond, SortedOptions: redisq.SortedOptions{Options: o}})
		if err != nil {
			return nil, nil, err
		}
		return w.Sorted, func(key string) error { return w.Publish(ctx, key, []byte(key)) }, nil
	}
	s, err := redisq.OpenSorted[time.Time](ctx, srv.Client(), name, &redisq.SortedOptions{Options: o})
	if err != nil {
		return nil, nil, err
	}
	return s, func(key string) error { return s.Publish(ctx, time.Now(), key, []byte(key)) }, nil
}

// lostSortedQueue opens a sorted or windowed queue on a new server and
// fills it: two keys pending, one batch leased (returned), one dead.
func lostSortedQueue(t *testing.T, form, name string) (*redistest.Server, *redisq.Sorted[time.Time], *queue.Batch[time.Time]) {
	t.Helper()
	ctx := context.Background()
	srv := redistest.Start(t)
	s, publish, err := openLostForm(ctx, srv, form, name)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	for _, k := range []string{"dead", "leased", "pending-1", "pending-2"} {
		require.NoError(t, publish(k))
	}
	time.Sleep(time.Millisecond) // past the window
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.NoError(t, bs[0].DeadLetter("test"))
	bs, err = s.TryPull(1)
	require.NoError(t, err)
	require.Equal(t, "leased", bs[0].Key)
	return srv, s, bs[0]
}

// TestSortedLostKey: an operator (or a stray DEL, FLUSHDB of a few keys,
// an EXPIRE that ran out) deletes a key of a sorted or windowed queue
// that holds values: its payloads (val), delivery counts (vinfo), dead
// letters' reasons and places (vreason), leased batches (batch) or
// lifetime counters (stats), or every key but the counter. The queue must
// not go on as if nothing happened, losing what those keys held without a
// word: every call (publish, pull, the settlements, housekeeping, stats,
// the dead values, Open) fails with queue.ErrCorrupt naming the key, and
// writes nothing.
func TestSortedLostKey(t *testing.T) {
	ctx := context.Background()
	var butSeq []string
	for _, k := range sortedKeyNames[1:] {
		butSeq = append(butSeq, k)
	}
	for _, form := range []string{"sorted", "windowed"} {
		for _, c := range []struct {
			name    string
			deleted []string
		}{
			{"val", []string{"val"}},
			{"vinfo", []string{"vinfo"}},
			{"vreason", []string{"vreason"}},
			{"batch", []string{"batch"}},
			{"stats", []string{"stats"}},
			{"all but seq", butSeq},
		} {
			t.Run(form+"/"+c.name, func(t *testing.T) {
				name := "lostkey-" + form + "-" + strings.ReplaceAll(c.name, " ", "")
				srv, s, leased := lostSortedQueue(t, form, name)
				rdb := srv.Client()
				var keys []string
				for _, k := range c.deleted {
					keys = append(keys, "walq:{"+name+"}:s:"+k)
				}
				require.NoError(t, rdb.Del(ctx, keys...).Err())
				before := keyContents(t, rdb, "walq:{"+name+"}*")

				requireLost(t, s.Publish(ctx, time.Now(), "new", []byte("n")), keys, "a publish")
				_, err := s.TryPull(10)
				requireLost(t, err, keys, "a pull")
				requireLost(t, leased.Ack(), keys, "an ack")
				requireLost(t, leased.Nack(0), keys, "a nack")
				requireLost(t, leased.Extend(time.Minute), keys, "an extend")
				requireLost(t, leased.DeadLetter("x"), keys, "a dead-lettering")
				_, err = s.RequeueExpired()
				requireLost(t, err, keys, "housekeeping")
				_, err = s.StatsContext(ctx)
				requireLost(t, err, keys, "stats")
				_, err = s.DeadValues(0, 10)
				requireLost(t, err, keys, "the dead values")
				_, err = s.RequeueAllDead()
				requireLost(t, err, keys, "a requeue of the dead values")
				_, err = s.PurgeAllDead()
				requireLost(t, err, keys, "a purge of the dead values")
				_, _, err = openLostForm(ctx, srv, form, name)
				requireLost(t, err, keys, "Open")
				require.Equal(t, before, keyContents(t, rdb, "walq:{"+name+"}*"), "a refused call wrote nothing")
			})
		}
	}
}

// TestSortedLostKeyWayOut: the way out the error names, writing the
// placeholder back, lets the queue go on with what is left: the values
// whose payloads a lost val held go to the dead values when pulled.
func TestSortedLostKeyWayOut(t *testing.T) {
	ctx := context.Background()
	srv, s, leased := lostSortedQueue(t, "sorted", "lostkey-wayout")
	rdb := srv.Client()
	val := "walq:{lostkey-wayout}:s:val"
	require.NoError(t, rdb.Del(ctx, val).Err())
	_, err := s.TryPull(10)
	requireLost(t, err, []string{val}, "a pull")
	require.NoError(t, rdb.HSet(ctx, val, "", strings.Repeat("~", 256)).Err())
	require.NoError(t, leased.Ack())
	require.NoError(t, s.Publish(ctx, time.Now(), "after", []byte("kept")))
	st, err := s.StatsContext(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, st.SortedPending, "pending-1, pending-2 (payloads lost) and after")
}

// TestSortedNewQueueNotLost: a queue that never published, or drained to
// nothing, is no lost queue: its handles run.
func TestSortedNewQueueNotLost(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	for _, form := range []string{"sorted", "windowed"} {
		s, publish, err := openLostForm(ctx, srv, form, "fresh-"+form)
		require.NoError(t, err)
		_, err = s.StatsContext(ctx)
		require.NoError(t, err)
		_, err = s.TryPull(1)
		require.ErrorIs(t, err, queue.ErrEmpty)
		require.NoError(t, publish("k"))
		time.Sleep(time.Millisecond)
		bs, err := s.TryPull(1)
		require.NoError(t, err)
		require.NoError(t, bs[0].Ack())
		_, err = s.StatsContext(ctx)
		require.NoError(t, err)
		require.NoError(t, s.Close())
		s, _, err = openLostForm(ctx, srv, form, "fresh-"+form)
		require.NoError(t, err, "a drained queue opens")
		require.NoError(t, s.Close())
	}
}

// TestSortedStrayKeyNotLost: a new queue one of whose hashes is held by a
// key of another type (a stray key of another program under the same
// name) has lost nothing: Open and a publish run, and the calls that use
// that key are refused naming it as of the wrong type, not as deleted.
// Once the stray key is gone the queue takes its placeholders, and a key
// deleted after that is reported again.
func TestSortedStrayKeyNotLost(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client()
	for _, form := range []string{"sorted", "windowed"} {
		name := "stray-" + form
		vreason := "walq:{" + name + "}:s:vreason"
		require.NoError(t, rdb.Set(ctx, vreason, "another program's", 0).Err())
		s, publish, err := openLostForm(ctx, srv, form, name)
		require.NoError(t, err, "Open of a queue that never published")
		require.NoError(t, publish("k"), "a publish, which does not use vreason")
		time.Sleep(time.Millisecond) // past the window
		_, err = s.TryPull(1)
		require.ErrorContains(t, err, "WRONGTYPE queue key "+vreason)
		require.NotContains(t, err.Error(), "was deleted")
		require.NoError(t, rdb.Del(ctx, vreason).Err())
		bs, err := s.TryPull(1)
		require.NoError(t, err)
		require.Equal(t, "k", bs[0].Key)
		require.NoError(t, bs[0].Ack())
		vinfo := "walq:{" + name + "}:s:vinfo"
		require.NoError(t, rdb.Del(ctx, vinfo).Err())
		requireLost(t, publish("after"), []string{vinfo}, "a publish")
		require.NoError(t, s.Close())
	}
}

// storedFields is the number of fields of the hash key but its
// placeholder (the field "", see held in scripts/sorted.lua).
func storedFields(ctx context.Context, rdb redis.UniversalClient, key string) (int64, error) {
	n, err := rdb.HLen(ctx, key).Result()
	if err != nil {
		return 0, err
	}
	held, err := rdb.HExists(ctx, key, "").Result()
	if held {
		n--
	}
	return n, err
}
