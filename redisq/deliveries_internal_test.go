package redisq

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestDeliveriesPastInt32: a delivery count past 2^31 on the server reads
// as itself where int holds it, and as math.MaxInt where int has 32 bits
// (GOARCH=386, arm): never wrapped to a negative or small count, and a
// dead letter's record that carries it is no corrupt one.
func TestDeliveriesPastInt32(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	q, err := Open(ctx, rdb, "deliveries-past-int32", &Options{MaxDeliveries: -1})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("x"), queue.WithID("big"))
	require.NoError(t, err)
	const had = int64(1)<<31 + 5 // deliveries before the next one
	rec := "1:" + strconv.FormatInt(had, 10) + "::3:big"
	require.NoError(t, rdb.HSet(ctx, q.keys[1], "1", rec).Err())

	want := int64(min(had+1, math.MaxInt))
	takes := []struct {
		name string
		take func() (*queue.Message, error)
	}{
		{"one", q.TryDequeue}, // the lease1 function
		{"batch", func() (*queue.Message, error) { // the dequeue function
			ms, err := q.DequeueBatch(ctx, 2)
			if err != nil || len(ms) == 0 {
				return nil, err
			}
			return ms[0], nil
		}},
	}
	for _, tk := range takes {
		m, err := tk.take()
		require.NoError(t, err, tk.name)
		require.NotNil(t, m, tk.name)
		require.Equal(t, want, int64(m.Deliveries), tk.name)
		require.NoError(t, m.Nack(0))
		want = int64(min(had+2, math.MaxInt))
	}

	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, m.DeadLetter("done"))
	dead, err := q.DeadLetters(0, 0)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "done", dead[0].Reason)
	require.Equal(t, int64(min(had+3, math.MaxInt)), int64(dead[0].Deliveries))
}

// TestSortedDeliveriesPastInt32: as TestDeliveriesPastInt32, for a sorted
// queue's values and dead values.
func TestSortedDeliveriesPastInt32(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s, err := OpenSorted[int64](ctx, rdb, "sorted-deliveries-past-int32",
		&SortedOptions{Options: Options{MaxDeliveries: -1, ManualRequeue: true}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "k", []byte("v")))
	const had = int64(1)<<31 + 5 // deliveries before the next one
	require.NoError(t, rdb.HSet(ctx, s.keys[2], "1", had).Err())

	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.Len(t, bs[0].Values, 1)
	require.Equal(t, int64(min(had+1, math.MaxInt)), int64(bs[0].Values[0].Deliveries))
	require.NoError(t, bs[0].DeadLetter("done"))
	dead, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "done", dead[0].Reason)
	require.Equal(t, int64(min(had+1, math.MaxInt)), int64(dead[0].Deliveries))
}

// TestDeliveriesAroundSmallCounts: a lease reads the delivery count its
// record holds and writes the next one, by a table look-up for the small
// counts most records carry (0 to 99) and by conversion past them, so
// the counts at that edge, and one written with leading zeros, come out
// the same on both paths; a message at MaxDeliveries is not delivered
// again but dead-lettered with the count it had.
func TestDeliveriesAroundSmallCounts(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	takes := leasePaths(ctx)
	cases := []struct {
		stored string // deliveries in the record before the lease
		want   int    // the message's Deliveries; 0: dead-lettered at the limit
	}{
		{"0", 1}, {"98", 99}, {"99", 100}, {"100", 0}, {"101", 0}, {"007", 8}, {"0099", 100},
	}
	for _, tk := range takes {
		for _, c := range cases {
			t.Run(tk.name+"/"+c.stored, func(t *testing.T) {
				q, err := Open(ctx, rdb, "small-counts-"+tk.name+"-"+c.stored, &Options{MaxDeliveries: 100})
				require.NoError(t, err)
				defer q.Close()
				_, err = q.Enqueue(ctx, []byte("x"), queue.WithID("m"))
				require.NoError(t, err)
				require.NoError(t, rdb.HSet(ctx, q.keys[1], "1", "1:"+c.stored+"::1:m").Err())

				m, err := tk.take(q)
				if c.want == 0 {
					require.ErrorIs(t, err, queue.ErrEmpty)
					dead, err := q.DeadLetters(0, 0)
					require.NoError(t, err)
					require.Len(t, dead, 1)
					n, _ := strconv.Atoi(c.stored)
					require.Equal(t, n, dead[0].Deliveries)
					return
				}
				require.NoError(t, err)
				require.NotNil(t, m)
				require.Equal(t, c.want, m.Deliveries)
				require.NoError(t, m.Nack(0))
				m, err = q.TryDequeue()
				if c.want == 100 { // given back at the limit: dead
					require.ErrorIs(t, err, queue.ErrEmpty)
					return
				}
				require.NoError(t, err)
				require.Equal(t, c.want+1, m.Deliveries, "the count the lease wrote reads back")
				require.NoError(t, m.Ack())
			})
		}
	}
}

// TestLifetimeDeliveriesAcrossQueues: the lifetime count of deliveries
// (Stats.Delivered, the field '#d') a lease writes is the count its own
// queue held plus one, whatever the queues leased before it on the same
// server held, on the lone and the gathered lease alike. Queue a holds
// a count written by hand or by another program: no whole number
// ('-1.5', whose next count -0.5 is written '0'), one written otherwise
// ('1e3', '007') or no number; queue b holds '0', which a settle leaves
// after taking back the only delivery of a corrupt body. After a lease
// on a, then one on b, b counts one delivery.
func TestLifetimeDeliveriesAcrossQueues(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	takes := leasePaths(ctx)
	for _, tk := range takes {
		for _, held := range []string{"-1.5", "-0.5", "1.5", "1e3", "007", "x", ""} {
			t.Run(tk.name+"/"+held, func(t *testing.T) {
				open := func(name string, delivered string) *Queue {
					q, err := Open(ctx, rdb, "lifetime-"+tk.name+"-"+held+"-"+name, nil)
					require.NoError(t, err)
					t.Cleanup(func() { q.Close() })
					_, err = q.Enqueue(ctx, []byte("x"))
					require.NoError(t, err)
					require.NoError(t, rdb.HSet(ctx, q.keys[1], "#d", delivered).Err())
					return q
				}
				a, b := open("a", held), open("b", "0")
				for _, q := range []*Queue{a, b} {
					m, err := tk.take(q)
					require.NoError(t, err)
					require.Equal(t, 1, m.Deliveries)
				}
				st, err := b.StatsContext(ctx)
				require.NoError(t, err)
				require.Equal(t, uint64(1), st.Delivered)
			})
		}
	}
}

// TestHintsAcrossQueues: leases on two queues of one server, taken in
// turn, each read their own queue's lifetime count ('#d') and announced
// deadline ('#t'): a holds a deadline ahead within the lease's (the
// lease is not announced, '#t' stays), b one past it (announced: '#t'
// becomes the lease's deadline), and their counts go on from 7 and 41.
func TestHintsAcrossQueues(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	open := func(name string) *Queue {
		q, err := Open(ctx, rdb, "hints-"+name, nil) // AckTimeout 30 s
		require.NoError(t, err)
		t.Cleanup(func() { q.Close() })
		for range 3 {
			_, err = q.Enqueue(ctx, []byte("x"))
			require.NoError(t, err)
		}
		return q
	}
	a, b := open("a"), open("b")
	require.NoError(t, rdb.HSet(ctx, a.keys[1], "#d", "7").Err())
	require.NoError(t, rdb.HSet(ctx, b.keys[1], "#d", "41").Err())
	micros := func(d time.Duration) string { return strconv.FormatInt(time.Now().Add(d).UnixMicro(), 10) }
	for round := 1; round <= 3; round++ {
		ta, tb := micros(20*time.Second), micros(time.Hour)
		require.NoError(t, rdb.HSet(ctx, a.keys[1], "#t", ta).Err())
		require.NoError(t, rdb.HSet(ctx, b.keys[1], "#t", tb).Err())
		for _, q := range []*Queue{a, b} {
			_, err := q.TryDequeue()
			require.NoError(t, err)
		}
		got, err := rdb.HGet(ctx, a.keys[1], "#t").Result()
		require.NoError(t, err)
		require.Equal(t, ta, got, "round %d: a's lease ends after '#t': not announced", round)
		dl, err := rdb.HGet(ctx, b.keys[1], "#t").Int64()
		require.NoError(t, err)
		old, _ := strconv.ParseInt(tb, 10, 64)
		require.Less(t, dl, old, "round %d: b's lease ends before '#t': announced", round)
		for q, want := range map[*Queue]uint64{a: uint64(7 + round), b: uint64(41 + round)} {
			st, err := q.StatsContext(ctx)
			require.NoError(t, err)
			require.Equal(t, want, st.Delivered, "round %d, %s", round, q.Name())
		}
	}
}

// leasePath is one way a handle leases a message: the lone lease (lease1)
// or dequeue's gathered leases.
type leasePath struct {
	name string
	take func(q *Queue) (*queue.Message, error)
}

// leasePaths returns both lease paths, for tests that check each.
func leasePaths(ctx context.Context) []leasePath {
	return []leasePath{
		{"one", func(q *Queue) (*queue.Message, error) { return q.TryDequeue() }}, // lease1
		{"batch", func(q *Queue) (*queue.Message, error) { // dequeue's leases, gathered
			ms, err := q.dequeue(ctx, 2, false)
			if err != nil || len(ms) == 0 {
				return nil, err
			}
			return ms[0], nil
		}},
	}
}
