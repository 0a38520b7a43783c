package redisq

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq/internal/redistest"
)

// failLease runs the dequeue function at the time at for up to max
// messages and requires it to fail naming key.
func failLease(t *testing.T, q *Queue, at time.Time, max int, key string) {
	t.Helper()
	args := q.leaseArgs(at, max)
	_, err := q.run(context.Background(), fnDequeue, at, args...)
	require.ErrorContains(t, err, key)
}

// spoilKey overwrites key with a string and returns a function that
// restores it as it was (absent, if it was).
func spoilKey(t *testing.T, rdb *redis.Client, key string) (restore func()) {
	t.Helper()
	saved := keyFault{name: key}.spoil(context.Background(), t, rdb, key)
	return func() {
		t.Helper()
		putBack(t, rdb, key, saved)
	}
}

// TestFailedLeaseAnnouncesPromotion: a dequeue that made a due delayed
// message ready and then failed on a key of the wrong type (the lease
// key at the lease, or the dead key at the burial of a damaged record)
// leaves that message ready, so it must say so on the wake channel as
// every other way of making a message ready does: the housekeeping pass
// at the due time finds nothing left to promote and says nothing, and a
// consumer blocked in Dequeue on another handle would wait for a message
// that is there. A lone dequeue and a gathered one, with nothing ready
// (the call promotes before it pops) and with a message ready (it pops,
// reads '#w', puts back and promotes).
func TestFailedLeaseAnnouncesPromotion(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	for _, max := range []int{1, 2} {
		for _, behind := range []bool{false, true} {
			for _, fault := range []string{"lease", "burial"} {
				name := fmt.Sprintf("max=%d/behind=%v/%s", max, behind, fault)
				t.Run(name, func(t *testing.T) {
					// The handle's clock stays before the due time, so its
					// housekeeper never promotes; the calls below run later.
					clock := queuetest.NewClock()
					q, err := Open(ctx, rdb, "failed-lease-"+name, &Options{Clock: noTimers{clock},
						ManualRequeue: true, AckTimeout: time.Minute})
					require.NoError(t, err)
					defer q.Close()
					_, err = q.Enqueue(ctx, []byte("f"), queue.WithID("f"), queue.WithDelay(time.Second))
					require.NoError(t, err)
					if behind {
						_, err = q.Enqueue(ctx, []byte("a"), queue.WithID("a"))
						require.NoError(t, err)
					}
					seq, err := rdb.HGet(ctx, q.keys[1], "if").Result()
					require.NoError(t, err)
					key := q.keys[4]
					if fault == "burial" {
						require.NoError(t, rdb.HSet(ctx, q.keys[1], seq, "not a record").Err())
						key = q.keys[5]
					}
					sub := subscribe(t, rdb, q.wake)
					restore := spoilKey(t, rdb, key)

					due := clock.Now().Add(2 * time.Second)
					failLease(t, q, due, max, key)
					restore()
					_, err = rdb.ZScore(ctx, q.keys[2], seq).Result()
					require.NoError(t, err, "the promoted message is ready")
					_, err = q.run(ctx, fnHousekeep, due, "0", 1000)
					require.NoError(t, err)
					waitFor(t, sub, "r")
				})
			}
		}
	}
}

// TestFailedGatheredLeasePutsBack: a gathered lease that fails on a
// lease key of the wrong type, with nothing buried, puts every message
// it popped back with its score: nothing leased, no record rewritten,
// no delivery counted, seq and stats as they were; a delayed message
// the call promoted stays ready (it is due). Once the key is restored
// the messages come out in the order they had: ready again first, then
// the promoted one, then never delivered.
func TestFailedGatheredLeasePutsBack(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	for _, promote := range []bool{false, true} {
		t.Run(fmt.Sprint("promote=", promote), func(t *testing.T) {
			clock := queuetest.NewClock()
			// restless: a housekeeping pass may run between any two steps.
			q, err := Open(ctx, rdb, fmt.Sprint("failed-gathered-", promote), &Options{Clock: noTimers{clock},
				ManualRequeue: true, AckTimeout: time.Minute, restless: true})
			require.NoError(t, err)
			defer q.Close()
			for _, p := range []string{"a", "b", "c", "d", "e"} {
				_, err := q.Enqueue(ctx, []byte(p))
				require.NoError(t, err)
			}
			var fseq string
			if promote {
				_, err := q.Enqueue(ctx, []byte("f"), queue.WithID("f"), queue.WithDelay(time.Second))
				require.NoError(t, err)
				fseq = rdb.HGet(ctx, q.keys[1], "if").Val()
			}
			ms := leaseAt(t, q, clock.Now(), 2)
			require.Len(t, ms, 2)
			require.NoError(t, ms[1].Nack(0)) // b ready again, before the fresh ones
			// The calls below run after f is due, but the handle's clock
			// stays before it: a housekeeping pass woken by the nack must
			// not promote f before the failing call does.
			at := clock.Now().Add(2 * time.Second)

			before := leaseState(t, rdb, q)
			if promote { // f is due: the call makes it ready
				f, err := strconv.ParseFloat(fseq, 64)
				require.NoError(t, err)
				before.ready = append(before.ready, redis.Z{Score: f, Member: fseq})
				sort.SliceStable(before.ready, func(i, j int) bool { return before.ready[i].Score < before.ready[j].Score })
				before.delayed = []redis.Z{}
			}
			restore := spoilKey(t, rdb, q.keys[4])
			failLease(t, q, at, 3, q.keys[4])
			restore()
			require.Equal(t, before, leaseState(t, rdb, q), "every popped message back with its score, nothing else written")

			var order []string
			for _, m := range leaseAt(t, q, at, 10) {
				order = append(order, fmt.Sprintf("%s%d", m.Payload, m.Deliveries))
			}
			want := []string{"b2", "c1", "d1", "e1"}
			if promote {
				want = []string{"b2", "f1", "c1", "d1", "e1"}
			}
			require.Equal(t, want, order)
		})
	}
}

// failedLeaseState is what a failed lease must leave as it was: the seq
// counter, the ready and delayed sets with their scores, the lease set,
// the message hash but for the hints '#w' (a promotion rewrites it) and
// '#q', and the stats.
type failedLeaseState struct {
	seq            string
	ready, delayed []redis.Z
	lease          []redis.Z
	msg, stats     map[string]string
}

func leaseState(t *testing.T, rdb *redis.Client, q *Queue) failedLeaseState {
	t.Helper()
	ctx := context.Background()
	var s failedLeaseState
	var err error
	s.seq, err = rdb.Get(ctx, q.keys[0]).Result()
	require.NoError(t, err)
	s.ready, err = rdb.ZRangeWithScores(ctx, q.keys[2], 0, -1).Result()
	require.NoError(t, err)
	s.delayed, err = rdb.ZRangeWithScores(ctx, q.keys[3], 0, -1).Result()
	require.NoError(t, err)
	s.lease, err = rdb.ZRangeWithScores(ctx, q.keys[4], 0, -1).Result()
	require.NoError(t, err)
	s.msg, err = rdb.HGetAll(ctx, q.keys[1]).Result()
	require.NoError(t, err)
	delete(s.msg, "#w")
	delete(s.msg, "#q")
	s.stats, err = rdb.HGetAll(ctx, q.keys[7]).Result()
	require.NoError(t, err)
	return s
}

// TestFailedGatheredLeaseAnnouncesNoDeadline: a gathered lease that fails
// on the lease key, with nothing promoted and nothing leased, wrote no
// deadline, so it publishes nothing on the wake channel: no 't<µs>' for
// a deadline no lease has. A message published after the call ends what
// is read: the channel delivers in order.
func TestFailedGatheredLeaseAnnouncesNoDeadline(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	clock := queuetest.NewClock()
	q, err := Open(ctx, rdb, "failed-lease-deadline", &Options{Clock: noTimers{clock},
		ManualRequeue: true, AckTimeout: time.Minute})
	require.NoError(t, err)
	defer q.Close()
	for _, p := range []string{"a", "b", "c"} {
		_, err := q.Enqueue(ctx, []byte(p))
		require.NoError(t, err)
	}
	sub := subscribe(t, rdb, q.wake)
	restore := spoilKey(t, rdb, q.keys[4])
	failLease(t, q, clock.Now(), 2, q.keys[4])
	restore()
	require.NoError(t, rdb.Publish(ctx, q.wake, "end").Err())
	m := <-sub
	require.Equal(t, "end", m.Payload, "a failed lease that wrote no deadline published before the end")
}
