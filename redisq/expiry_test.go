package redisq_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestUnannouncedLeaseExpires: a lease whose deadline is no earlier than
// the last one announced is not announced, so the housekeepers must stay
// armed for that announced deadline even after a pass that found no
// lease (here those a short delay causes, after the first lease was acked).
// The later leases must run out near their deadlines, not at the
// housekeeper's idle recheck (30s).
func TestUnannouncedLeaseExpires(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	q, err := redisq.Open(ctx, srv.Client(), "unannounced", &redisq.Options{AckTimeout: 800 * time.Millisecond})
	require.NoError(t, err)
	defer q.Close()

	_, err = q.Enqueue(ctx, []byte("first"))
	require.NoError(t, err)
	m, err := q.Dequeue(ctx) // its deadline is announced
	require.NoError(t, err)
	require.NoError(t, m.Ack())

	// A delay kicks every housekeeper into a pass now and another when
	// it falls due: both find no lease.
	_, err = q.Enqueue(ctx, []byte("tick"), queue.WithDelay(20*time.Millisecond))
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond)

	_, err = q.Enqueue(ctx, []byte("second"))
	require.NoError(t, err)
	leased := time.Now()
	for _, want := range []string{"tick", "second"} { // neither deadline is announced
		m, err := q.Dequeue(ctx)
		require.NoError(t, err)
		require.Equal(t, want, string(m.Payload))
	}

	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, want := range []string{"tick", "second"} {
		again, err := q.Dequeue(wait)
		require.NoError(t, err, "the leases did not run out within 10s")
		require.Equal(t, want, string(again.Payload))
		require.Equal(t, 2, again.Deliveries)
		require.NoError(t, again.Ack())
	}
	require.Less(t, time.Since(leased), 10*time.Second)
}

// TestDelayedWhileConsumersWait: consumers blocked on one handle get every
// message another handle enqueues meanwhile, immediate and delayed mixed,
// each delayed one no earlier than its due time; no consumer polls, so
// the delayed ones reach them through a housekeeper's promotion or the
// lease of a consumer woken for another message.
func TestDelayedWhileConsumersWait(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	consumers, err := redisq.Open(ctx, srv.Client(), "delayed-while-waiting", nil)
	require.NoError(t, err)
	defer consumers.Close()
	producer, err := redisq.Open(ctx, srv.Client(), "delayed-while-waiting", nil)
	require.NoError(t, err)
	defer producer.Close()

	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	type got struct {
		payload string
		at      time.Time
		err     error
	}
	const n = 8
	out := make(chan got, n)
	for range 3 {
		go func() {
			for {
				m, err := consumers.Dequeue(wait)
				if err != nil {
					out <- got{err: err}
					return
				}
				out <- got{payload: string(m.Payload), at: time.Now(), err: m.Ack()}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond) // let them block
	start := time.Now()
	due := map[string]time.Time{}
	for i := range n {
		p := fmt.Sprint("m", i)
		var opts []queue.EnqueueOption
		if i%2 == 1 {
			d := time.Duration(i*15) * time.Millisecond
			opts = append(opts, queue.WithDelay(d))
			due[p] = time.Now().Add(d)
		}
		_, err := producer.Enqueue(ctx, []byte(p), opts...)
		require.NoError(t, err)
	}
	seen := map[string]bool{}
	for range n {
		g := <-out
		require.NoError(t, g.err, "every message within 10s")
		require.False(t, seen[g.payload], "delivered once")
		seen[g.payload] = true
		if d, ok := due[g.payload]; ok {
			require.False(t, g.at.Before(d), "%s before its due time", g.payload)
		}
	}
	require.Len(t, seen, n)
	require.Less(t, time.Since(start), 10*time.Second)
}

// TestSortedUnreadableBatchEnds: a single-flight key whose batch record
// and its copy are both garbled, so that nothing names the batch's
// values: the end of its lease (by the housekeeper, by RequeueExpired)
// still lowers the key's count of leased batches and the count of leased
// values, from what the pull recorded of the batch apart, so a value
// published to the key later is pullable; and it reports the batch,
// naming its lease and key: RequeueExpired with an error wrapping
// queue.ErrCorrupt, the housekeeper in its log. The key's count was left
// at 1, and the key was never pullable again.
func TestSortedUnreadableBatchEnds(t *testing.T) {
	for _, end := range []string{"housekeeper", "requeue expired"} {
		t.Run(end, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client()
			ctx := context.Background()
			clock := queuetest.NewClock()
			var logs syncBuffer
			o := redisq.Options{Clock: noTimers{clock}, AckTimeout: time.Minute, ManualRequeue: true}
			if end == "housekeeper" {
				o = redisq.Options{AckTimeout: 300 * time.Millisecond, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
			}
			s, b := pulledSorted(t, rdb, "unread", o, "k", "one", "two")
			tok := strconv.FormatUint(b.Receipt.Lease, 10)
			require.NoError(t, rdb.HSet(ctx, "walq:{unread}:s:batch", tok, "garbled", "c"+tok, "garbled").Err())
			var ended error
			if end == "housekeeper" {
				require.Eventually(t, func() bool { return s.Stats().SortedBatches == 0 }, 10*time.Second, 20*time.Millisecond)
			} else {
				clock.Advance(2 * time.Minute)
				var n int
				n, ended = s.RequeueExpired()
				require.Equal(t, 1, n)
			}

			require.NoError(t, s.Publish(ctx, 3, "k", []byte("three")))
			got, err := s.TryPull(10)
			require.NoError(t, err, "k stranded: flight %v", rdb.HGetAll(ctx, "walq:{unread}:s:flight").Val())
			require.Len(t, got, 1)
			require.Equal(t, []byte("three"), got[0].Values[0].Payload)
			require.NoError(t, got[0].Ack())
			st := s.Stats()
			require.Equal(t, [2]int{0, 0}, [2]int{st.SortedBatches, st.SortedLeased}, "no batch or value counted leased")
			left, err := storedFields(ctx, rdb, "walq:{unread}:s:batch")
			require.NoError(t, err)
			require.Zero(t, left, "nothing of the batch left")

			if end == "housekeeper" {
				require.True(t, logs.has("redisq: batch records unreadable; their leases ended"))
				require.True(t, logs.contains(tok))
				return
			}
			require.ErrorIs(t, ended, queue.ErrCorrupt)
			require.ErrorContains(t, ended, "lease "+tok+` of key "k"`)
		})
	}
}

// pulledSorted opens the single-flight sorted queue name with o,
// publishes payloads under key, at the sort keys 1, 2, ..., and pulls
// them, one batch, which it returns with the handle (closed at the
// test's end).
func pulledSorted(t *testing.T, rdb *redis.Client, name string, o redisq.Options, key string, payloads ...string) (*redisq.Sorted[int64], *queue.Batch[int64]) {
	t.Helper()
	ctx := context.Background()
	s, err := redisq.OpenSorted[int64](ctx, rdb, name, &redisq.SortedOptions{SingleFlight: true, Options: o})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	for i, p := range payloads {
		require.NoError(t, s.Publish(ctx, int64(i+1), key, []byte(p)))
	}
	bs, err := s.TryPull(len(payloads))
	require.NoError(t, err)
	require.Len(t, bs, 1)
	return s, bs[0]
}
