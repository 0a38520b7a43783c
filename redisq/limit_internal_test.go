package redisq

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestLimitGarbledDeliveryCount: a ready message whose delivery count was
// overwritten by hand is dead-lettered by a dequeue as a message past the
// limit, with the count as a number in the reason, when the count reads
// as one (leading zeros), and as a corrupt record when it has more digits
// than a count can have; either way its record stays readable by the
// scripts (a count of 20 digits was rewritten negative) and the next
// message is delivered.
func TestLimitGarbledDeliveryCount(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	for _, tc := range []struct{ count, reason string }{
		{"003", "3 deliveries, limit 3; not delivered again"},
		{"9223372036854775807", "corrupt record: unreadable"},
		{"99999999999999999999", "corrupt record: unreadable"},
		{"123456789012345", "corrupt record: unreadable"},
	} {
		t.Run(tc.count, func(t *testing.T) {
			q, err := Open(ctx, rdb, "garbled-count-"+tc.count, &Options{MaxDeliveries: 3, ManualRequeue: true})
			require.NoError(t, err)
			defer q.Close()
			for _, p := range []string{"a", "b"} {
				_, err := q.Enqueue(ctx, []byte(p), queue.WithID(p))
				require.NoError(t, err)
			}
			raw, err := rdb.HGet(ctx, q.keys[1], "1").Result()
			require.NoError(t, err)
			garbled := regexp.MustCompile(`^([01]):\d+:`).ReplaceAllString(raw, "${1}:"+tc.count+":")
			require.NoError(t, rdb.HSet(ctx, q.keys[1], "1", garbled).Err())
			m, err := q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, "b", string(m.Payload))
			dead, err := q.DeadLetters(0, 10)
			require.NoError(t, err)
			require.Len(t, dead, 1)
			require.Equal(t, "a", dead[0].ID)
			require.Equal(t, tc.reason, dead[0].Reason)
			raw, err = rdb.HGet(ctx, q.keys[1], "1").Result()
			require.NoError(t, err)
			require.Regexp(t, `^[01]:\d{1,14}:`, raw, "the dead record reads")
			require.NoError(t, q.RequeueDead("a"))
			m, err = q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, "a", string(m.Payload))
		})
	}
}

// TestLimitGarbledCountWhileLeased: a delivery count overwritten by hand
// while its message is leased, with more digits than a count can have,
// is met by the end of the lease (a nack, with or without a delay, or
// its expiry) as a dequeue meets it in a ready message: the message is
// dead-lettered as a corrupt record, not made ready again with a wrapped
// count, and a dead-lettering by receipt keeps its reason. Either way
// the record stays readable, with its producer flag, so that a listing
// shows it with no negative count and a purge frees its producer id
// (Stats.DedupIDs back to 0, the id taken again).
func TestLimitGarbledCountWhileLeased(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	ends := map[string]struct {
		end    func(q *Queue, m *queue.Message, clock *queuetest.Clock) error
		reason string
	}{
		"nack":          {func(_ *Queue, m *queue.Message, _ *queuetest.Clock) error { return m.Nack(0) }, "corrupt record: unreadable"},
		"delayed nack":  {func(_ *Queue, m *queue.Message, _ *queuetest.Clock) error { return m.Nack(time.Hour) }, "corrupt record: unreadable"},
		"dead letter":   {func(_ *Queue, m *queue.Message, _ *queuetest.Clock) error { return m.DeadLetter("poison") }, "poison"},
		"lease expired": {expireAll, "corrupt record: unreadable"},
	}
	for how, end := range ends {
		for _, maxd := range []int{3, -1} {
			for _, count := range []string{"99999999999999999999", "123456789012345"} {
				name := fmt.Sprintf("%s/limit %d/count %s", how, maxd, count)
				t.Run(name, func(t *testing.T) {
					clock := queuetest.NewClock()
					q, err := Open(ctx, rdb, "garbled-leased-"+strings.ReplaceAll(name, "/", "-"),
						&Options{MaxDeliveries: maxd, ManualRequeue: true, Clock: noTimers{clock}})
					require.NoError(t, err)
					defer q.Close()
					_, err = q.Enqueue(ctx, []byte("a"), queue.WithID("a"))
					require.NoError(t, err)
					m, err := q.TryDequeue()
					require.NoError(t, err)
					raw, err := rdb.HGet(ctx, q.keys[1], "1").Result()
					require.NoError(t, err)
					garbled := regexp.MustCompile(`^([01]):\d+:`).ReplaceAllString(raw, "${1}:"+count+":")
					require.NoError(t, rdb.HSet(ctx, q.keys[1], "1", garbled).Err())

					require.NoError(t, end.end(q, m, clock))
					raw, err = rdb.HGet(ctx, q.keys[1], "1").Result()
					require.NoError(t, err)
					require.Regexp(t, `^1:\d{1,14}:`, raw, "the record reads, its producer flag kept")
					st, err := q.StatsContext(ctx)
					require.NoError(t, err)
					require.Equal(t, [3]int64{0, 0, 1}, [3]int64{st.Ready + st.Delayed, st.InFlight, st.Dead})
					dead, err := q.DeadLetters(0, 10)
					require.NoError(t, err)
					require.Len(t, dead, 1)
					require.Equal(t, "a", dead[0].ID)
					require.Equal(t, end.reason, dead[0].Reason)
					require.Zero(t, dead[0].Deliveries, "a count that does not read is 0")
					require.Equal(t, 1, st.DedupIDs)

					require.NoError(t, q.PurgeDead("a"))
					st, err = q.StatsContext(ctx)
					require.NoError(t, err)
					require.Zero(t, st.DedupIDs, "the purge freed the producer id")
					_, err = q.Enqueue(ctx, []byte("again"), queue.WithID("a"))
					require.NoError(t, err)
				})
			}
		}
	}
}

// TestLimitBillionthDelivery: a message delivered 999,999,999 times is
// delivered once more, and the count of 1,000,000,000 its lease holds
// reads back: with that MaxDeliveries (the embedded queue counts
// deliveries past it) the nack dead-letters it at its limit with the
// embedded queue's reason, not as a corrupt record.
func TestLimitBillionthDelivery(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	q, err := Open(ctx, rdb, "billion", &Options{MaxDeliveries: 1_000_000_000, ManualRequeue: true,
		Clock: noTimers{queuetest.NewClock()}})
	require.NoError(t, err)
	defer q.Close()
	setCount(t, q, "999999999")

	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, 1_000_000_000, m.Deliveries)
	require.NoError(t, m.Nack(0))
	dead, err := q.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "1000000000 deliveries; last: nacked", dead[0].Reason)
	require.Equal(t, 1_000_000_000, dead[0].Deliveries)
}

// TestLimitMostDeliveriesCounted: every count a lease writes reads back,
// with or without a limit: a message delivered once less than the most a
// record counts (99,999,999,999,999) is delivered, given back and listed
// with that count, and is then dead-lettered instead of being delivered
// again, since one more would not read.
func TestLimitMostDeliveriesCounted(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	for _, maxd := range []int{-1, math.MaxInt} {
		t.Run(fmt.Sprint("limit ", maxd), func(t *testing.T) {
			q, err := Open(ctx, rdb, fmt.Sprint("most-", maxd), &Options{MaxDeliveries: maxd, ManualRequeue: true,
				Clock: noTimers{queuetest.NewClock()}})
			require.NoError(t, err)
			defer q.Close()
			setCount(t, q, "99999999999998")

			m, err := q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, int64(99_999_999_999_999), int64(m.Deliveries))
			require.NoError(t, m.Nack(0))
			_, err = q.TryDequeue()
			require.ErrorIs(t, err, queue.ErrEmpty)
			dead, err := q.DeadLetters(0, 10)
			require.NoError(t, err)
			require.Len(t, dead, 1)
			require.Equal(t, "99999999999999 deliveries, limit 99999999999999; not delivered again", dead[0].Reason)
			require.Equal(t, int64(99_999_999_999_999), int64(dead[0].Deliveries))
		})
	}
}

// setCount enqueues the message "a" into q and sets its delivery count.
func setCount(t *testing.T, q *Queue, count string) {
	t.Helper()
	ctx := context.Background()
	_, err := q.Enqueue(ctx, []byte("a"), queue.WithID("a"))
	require.NoError(t, err)
	raw, err := q.rdb.HGet(ctx, q.keys[1], "1").Result()
	require.NoError(t, err)
	set := regexp.MustCompile(`^([01]):\d+:`).ReplaceAllString(raw, "${1}:"+count+":")
	require.NoError(t, q.rdb.HSet(ctx, q.keys[1], "1", set).Err())
}

// expireAll ends every lease of q past its deadline.
func expireAll(q *Queue, _ *queue.Message, clock *queuetest.Clock) error {
	clock.Advance(2 * q.o.AckTimeout)
	_, err := q.RequeueExpired()
	return err
}
