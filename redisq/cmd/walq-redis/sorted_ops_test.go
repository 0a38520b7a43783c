package main_test

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestStatsSorted: stats refused a sorted or windowed queue's URL; it now
// prints what walq prints of a directory's (kind and sort key type,
// pending values and keys, leased values and batches, dead values, the
// lifetime totals), less what a server has not (files, log positions),
// and changes nothing.
func TestStatsSorted(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := redisq.OpenSorted[int64](ctx, srv.Client(), "srt", &redisq.SortedOptions{Options: redisq.Options{ManualRequeue: true}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, -7, "bad", []byte("poison value")))
	require.NoError(t, s.Publish(ctx, 42, "k", []byte("forty-two")))
	require.NoError(t, s.Publish(ctx, 43, "k", []byte("forty-three")))
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.NoError(t, bs[0].DeadLetter("cannot parse"))
	oldest := s.Stats().OldestEnqueuedAt // forty-two's publish time
	require.False(t, oldest.IsZero())
	w, err := redisq.OpenWindowed(ctx, srv.Client(), "win", &redisq.WindowOptions{Window: time.Hour})
	require.NoError(t, err)
	defer w.Close()
	require.NoError(t, w.Publish(ctx, "k", []byte("v")))

	url := "redis://" + srv.Addr + "/0/srt"
	before := queueContents(t, srv.Client(), "walq:{srt}:*")
	require.Regexp(t, "^"+regexp.QuoteMeta("queue "+url+"\n"+
		"  kind        sorted, int64 sort keys\n"+
		"  pending     2 values in 1 keys\n"+
		"  leased      0 values in 0 batches\n"+
		"  dead        1\n")+
		"  oldest      [0-9.]+[µnm]?s ago \\(enqueued "+regexp.QuoteMeta(oldest.UTC().Format(time.RFC3339Nano))+"\\)\n"+
		regexp.QuoteMeta("lifetime\n  published 3, pulled 1 batches, acked 0 batches, moved 0\n")+"$", run(t, 0, "", "stats", url).stdout)
	var js struct {
		Queue, Kind string
		SortKey     string `json:"sort_key"`
		Sorted      struct {
			Pending, Keys, Dead, Published int
			OldestUnknown                  bool `json:"oldest_unknown"`
		}
		OldestAt string `json:"oldest_enqueued_at"`
	}
	require.NoError(t, json.Unmarshal([]byte(run(t, 0, "", "stats", "--json", url).stdout), &js))
	require.Equal(t, url, js.Queue)
	require.Equal(t, oldest.UTC().Format(time.RFC3339Nano), js.OldestAt, "the oldest pending value's publish time, the dead one's left out")
	require.Equal(t, [2]string{"sorted", "int64"}, [2]string{js.Kind, js.SortKey})
	require.Equal(t, [4]int{2, 1, 1, 3}, [4]int{js.Sorted.Pending, js.Sorted.Keys, js.Sorted.Dead, js.Sorted.Published})
	require.False(t, js.Sorted.OldestUnknown, "the age is known")
	require.Equal(t, before, queueContents(t, srv.Client(), "walq:{srt}:*"), "stats changed the queue")

	wurl := "redis://" + srv.Addr + "/0/win"
	out := run(t, 0, "", "stats", wurl).stdout
	require.Contains(t, out, "  kind        windowed, time sort keys\n  pending     1 values in 1 keys\n")
	require.Contains(t, out, "  oldest      ")
	require.NotContains(t, out, "  oldest      none")
}

// TestStatsSortedAgeUnknown: a sorted queue written by a release that
// kept no age set gives no oldest publish time while its values are
// pending; stats printed "oldest none", as of an empty queue, and now
// says the age is unknown.
func TestStatsSortedAgeUnknown(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := redisq.OpenSorted[int64](ctx, srv.Client(), "older", nil)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "k", []byte("v")))
	require.NoError(t, srv.Client().Del(ctx, "walq:{older}:s:age").Err()) // as that release left the queue
	st := s.Stats()
	require.NoError(t, st.OldestErr)
	require.Zero(t, st.OldestEnqueuedAt)
	out := run(t, 0, "", "stats", "redis://"+srv.Addr+"/0/older").stdout
	require.Contains(t, out, "  pending     1 values in 1 keys\n")
	require.Contains(t, out, "  oldest      unknown\n")
	var js struct {
		OldestAt string `json:"oldest_enqueued_at"`
		Sorted   struct {
			OldestUnknown bool `json:"oldest_unknown"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(run(t, 0, "", "stats", "--json", "redis://"+srv.Addr+"/0/older").stdout), &js))
	require.Empty(t, js.OldestAt)
	require.True(t, js.Sorted.OldestUnknown, "--json told an unknown age from an empty queue only by the counts")
}

// TestRequeueExpiredSorted: requeue-expired refused a sorted queue's URL,
// so that a batch pulled and never acked stayed leased with no
// application handle open. It now ends the leases that ran out, as of an
// ack queue: the values are pending again, or, with --max-deliveries, dead
// at that limit.
func TestRequeueExpiredSorted(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	url := "redis://" + srv.Addr + "/0/srt"
	lease := func() {
		s, err := redisq.OpenSorted[int64](ctx, srv.Client(), "srt", &redisq.SortedOptions{Options: redisq.Options{
			AckTimeout: time.Millisecond, ManualRequeue: true, MaxDeliveries: -1}})
		require.NoError(t, err)
		defer s.Close()
		bs, err := s.TryPull(1)
		require.NoError(t, err)
		require.Len(t, bs, 1)
		time.Sleep(5 * time.Millisecond) // past the lease's deadline
	}
	stats := func() (pending, batches, dead int) {
		rd, err := redisq.OpenSorted[int64](ctx, srv.Client(), "srt", &redisq.SortedOptions{Options: redisq.Options{ReadOnly: true}})
		require.NoError(t, err)
		defer rd.Close()
		st, err := rd.StatsContext(ctx)
		require.NoError(t, err)
		return st.SortedPending, st.SortedBatches, st.SortedDead
	}
	s, err := redisq.OpenSorted[int64](ctx, srv.Client(), "srt", nil)
	require.NoError(t, err)
	require.NoError(t, s.Publish(ctx, 1, "k", []byte("x")))
	require.NoError(t, s.Close())

	lease()
	require.Equal(t, "ended 1 lease\n", run(t, 0, "", "requeue-expired", url).stdout)
	p, b, d := stats()
	require.Equal(t, [3]int{1, 0, 0}, [3]int{p, b, d}, "the value is pending again")
	lease()
	require.Equal(t, "ended 1 lease, back to ready or, at 2 deliveries, to the dead set (the count does not split them)\n",
		run(t, 0, "", "requeue-expired", "--max-deliveries", "2", url).stdout)
	p, b, d = stats()
	require.Equal(t, [3]int{0, 0, 1}, [3]int{p, b, d}, "the second delivery went to the dead set")
	require.Equal(t, "ended 0 leases\n", run(t, 0, "", "requeue-expired", url).stdout)
}
