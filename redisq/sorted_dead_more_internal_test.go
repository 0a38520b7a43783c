package redisq

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// sortedCounts are the counts of s that both engines keep alike.
func sortedCounts(s queue.Stats) [8]uint64 {
	return [8]uint64{uint64(s.SortedPending), uint64(s.SortedKeys), uint64(s.SortedBatches), uint64(s.SortedLeased),
		uint64(s.SortedDead), s.Published, s.Pulled, s.BatchesAcked}
}

// TestSortedStatsMatchEmbedded: the same steps on both engines give the
// same Stats counts after every requeue and purge.
func TestSortedStatsMatchEmbedded(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for _, single := range []bool{false, true} {
		t.Run(fmt.Sprint("single=", single), func(t *testing.T) {
			r, err := OpenSorted[int64](ctx, srv.Client(), fmt.Sprint("stats-", single), &SortedOptions{SingleFlight: single, Options: Options{ManualRequeue: true}})
			require.NoError(t, err)
			defer r.Close()
			e, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{SingleFlight: single, Options: queue.Options{ManualRequeue: true}})
			require.NoError(t, err)
			defer e.Close()
			qs := []queue.SortedQueue[int64]{r, e}
			step := func(name string, f func(q queue.SortedQueue[int64])) {
				t.Helper()
				for _, q := range qs {
					f(q)
				}
				require.Equal(t, sortedCounts(e.Stats()), sortedCounts(r.Stats()), "after %s: embedded vs redis", name)
			}
			step("publish", func(q queue.SortedQueue[int64]) {
				for i, k := range []string{"a", "a", "b", "c", "d"} {
					require.NoError(t, q.Publish(ctx, int64(i), k, []byte(k)))
				}
			})
			var dead [2][]queue.DeadValue[int64]
			step("pull+dead", func(q queue.SortedQueue[int64]) {
				bs, err := q.TryPull(100)
				require.NoError(t, err)
				for _, b := range bs {
					if b.Key == "d" {
						require.NoError(t, b.Ack())
					} else {
						require.NoError(t, b.DeadLetter("x"))
					}
				}
			})
			for i, q := range qs {
				dead[i], err = q.DeadValues(0, 0)
				require.NoError(t, err)
				require.Len(t, dead[i], 4)
			}
			step("publish a again, pull it", func(q queue.SortedQueue[int64]) {
				require.NoError(t, q.Publish(ctx, 9, "a", []byte("a9")))
				_, err := q.TryPull(100)
				require.NoError(t, err)
			})
			step("requeue one of a while a is leased", func(q queue.SortedQueue[int64]) {
				i := 0
				if q == qs[1] {
					i = 1
				}
				require.NoError(t, q.RequeueDeadValue(dead[i][0]))
			})
			step("purge b", func(q queue.SortedQueue[int64]) {
				i := 0
				if q == qs[1] {
					i = 1
				}
				require.NoError(t, q.PurgeDeadValue(dead[i][2]))
			})
			step("requeue all", func(q queue.SortedQueue[int64]) {
				n, err := q.RequeueAllDead()
				require.NoError(t, err)
				require.Equal(t, 2, n)
			})
			step("pull", func(q queue.SortedQueue[int64]) {
				bs, err := q.TryPull(100)
				if err == nil {
					for _, b := range bs {
						require.NoError(t, b.DeadLetter("y"))
					}
				}
			})
			step("purge all", func(q queue.SortedQueue[int64]) {
				_, err := q.PurgeAllDead()
				require.NoError(t, err)
			})
		})
	}
}

// TestDeadValueDamagedFence: a stored value whose publish time cannot be
// read never crashes the fence nor lets a fenced requeue or purge act: it
// is refused as corrupt, and listed with a zero publish time.
func TestDeadValueDamagedFence(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s, err := OpenSorted[int64](ctx, rdb, "damaged", nil)
	require.NoError(t, err)
	defer s.Close()
	cases := map[string]string{
		"empty":         "",
		"short":         "\x93\xc4",
		"bin32 huge":    "\x93\xc6\xff\xff\xff\xff" + "0123456789abcdef",
		"bin16 huge":    "\x93\xc5\xff\xff" + "0123456789abcdef",
		"bin8 past end": "\x93\xc4\xf0" + "0123456789abcdef",
		"no d3":         "\x93\xc4\x01\x00\xcf" + "\x00\x00\x00\x00\x00\x00\x00\x01" + "\xc4\x00",
		"at end":        "\x93\xc4\x01\x00\xd3" + "\x00\x00\x00\x00\x00\x00\x01",
		"str sort":      "\x93\xa1\x00\xd3" + "\x00\x00\x00\x00\x00\x00\x00\x01" + "\xc4\x00",
		"bin32 neg":     "\x93\xc6\x80\x00\x00\x00" + "0123456789abcdef",
		"fixarray 4":    "\x94\xc4\x01\x00\xd3" + "\x00\x00\x00\x00\x00\x00\x00\x01" + "\xc4\x00",
	}
	i := int64(0)
	for name := range cases {
		i++
		require.NoError(t, s.Publish(ctx, i, name, []byte("p")))
	}
	bs, err := s.TryPull(100)
	require.NoError(t, err)
	for _, b := range bs {
		require.NoError(t, b.DeadLetter("x"))
	}
	ds, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, len(cases))
	for _, d := range ds {
		raw := cases[d.Key]
		require.NoError(t, rdb.HSet(ctx, s.keys[1], strconv.FormatUint(d.Seq, 10), raw).Err())
		fence := d
		fence.PublishedAt = time.Unix(0, 1)
		require.ErrorIs(t, s.PurgeDeadValue(fence), queue.ErrCorrupt, d.Key)
		require.ErrorIs(t, s.RequeueDeadValue(d), queue.ErrCorrupt, "%s as listed before the damage", d.Key)
		listed, err := s.DeadValues(d.Seq, 1)
		require.NoError(t, err)
		require.True(t, listed[0].PublishedAt.IsZero(), "%s: a time the fence cannot read is listed zero", d.Key)
		require.Contains(t, listed[0].Reason, corruptReason, d.Key)
		require.ErrorIs(t, s.RequeueDeadValue(listed[0]), queue.ErrCorrupt, "%s as listed", d.Key)
	}
	require.Equal(t, len(cases), s.Stats().SortedDead)
}

// TestDeadValueCorruptListedFence: RequeueDeadValue and PurgeDeadValue
// of a value DeadValues lists as a corrupt record whose publish time
// cannot be read fail with ErrCorrupt, as documented; one whose sort part
// alone is damaged is listed with its publish time and payload, and its
// listing names it for both.
func TestDeadValueCorruptListedFence(t *testing.T) {
	s, rdb, ds := deadValues(t, "corrupt-listed", 3)
	ctx := context.Background()
	at := binary.BigEndian.AppendUint64(nil, uint64(ds[1].PublishedAt.UnixNano()))
	require.NoError(t, rdb.HSet(ctx, s.keys[1], strconv.FormatUint(ds[0].Seq, 10), "garbage").Err())
	require.NoError(t, rdb.HSet(ctx, s.keys[1], strconv.FormatUint(ds[1].Seq, 10), "\x93\xc4\x01\x00\xd3"+string(at)+"\xc4\x01q").Err())
	require.NoError(t, rdb.HDel(ctx, s.keys[1], strconv.FormatUint(ds[2].Seq, 10)).Err())
	listed, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	for _, i := range []int{0, 2} {
		require.Contains(t, listed[i].Reason, corruptReason)
		require.True(t, listed[i].PublishedAt.IsZero())
		require.ErrorIs(t, s.RequeueDeadValue(listed[i]), queue.ErrCorrupt)
		require.ErrorIs(t, s.PurgeDeadValue(listed[i]), queue.ErrCorrupt)
	}
	require.Contains(t, listed[1].Reason, corruptReason)
	require.Equal(t, ds[1].PublishedAt.UnixNano(), listed[1].PublishedAt.UnixNano(), "the publish time that reads")
	require.Equal(t, "q", string(listed[1].Payload), "the payload that reads")
	zero := listed[1]
	zero.PublishedAt = time.Time{}
	require.ErrorIs(t, s.PurgeDeadValue(zero), queue.ErrNotFound, "a zero time names no value whose time reads")
	require.NoError(t, s.RequeueDeadValue(listed[1]))
	require.NoError(t, s.PurgeDead(listed[0].Seq), "by its seq alone")
	require.NoError(t, s.PurgeDead(listed[2].Seq), "by its seq alone")
	st := s.Stats()
	require.Equal(t, [2]int{0, 1}, [2]int{st.SortedDead, st.SortedPending})
}

// TestRequeueAllDeadPaging: RequeueAllDead over more than a page, with
// values whose key was not recorded among them, requeues each other one
// once, under its key at its sort key, with its payload.
func TestRequeueAllDeadPaging(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s, err := OpenSorted[int64](ctx, rdb, "paging", nil)
	require.NoError(t, err)
	defer s.Close()
	const n = 2600
	for i := 0; i < n; i++ {
		require.NoError(t, s.Publish(ctx, int64(n-i), fmt.Sprint("k", i%37), []byte(fmt.Sprint("p", i))))
	}
	for {
		bs, err := s.TryPull(1000)
		if err != nil {
			require.ErrorIs(t, err, queue.ErrEmpty)
			break
		}
		for _, b := range bs {
			require.NoError(t, b.DeadLetter("x"))
		}
	}
	ds, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, n)
	// drop the recorded key of a few, as a previous version leaves them
	old := map[uint64]bool{}
	for _, i := range []int{0, 999, 1000, 1001, 2000, 2599} {
		old[ds[i].Seq] = true
		require.NoError(t, rdb.HDel(ctx, s.keys[3], "m"+strconv.FormatUint(ds[i].Seq, 10)).Err())
	}
	got, err := s.RequeueAllDead()
	require.ErrorIs(t, err, queue.ErrCorrupt)
	require.Equal(t, n-len(old), got)
	st := s.Stats()
	require.Equal(t, [2]int{len(old), n - len(old)}, [2]int{st.SortedDead, st.SortedPending})
	seen := map[string]int{}
	bySeq := map[string]queue.DeadValue[int64]{}
	for _, d := range ds {
		bySeq[string(d.Payload)] = d
	}
	for {
		bs, err := s.TryPull(1000)
		if err != nil {
			break
		}
		for _, b := range bs {
			for _, v := range b.Values {
				seen[string(v.Payload)]++
				want := bySeq[string(v.Payload)]
				require.Equal(t, want.Key, b.Key)
				require.Equal(t, want.Sort, v.Sort)
				require.Equal(t, want.Payload, v.Payload)
			}
			require.NoError(t, b.Ack())
		}
	}
	require.Len(t, seen, n-len(old))
	for p, c := range seen {
		require.Equal(t, 1, c, "payload %s", p)
		require.False(t, old[bySeq[p].Seq])
	}
	p, err := s.PurgeAllDead()
	require.NoError(t, err)
	require.Equal(t, len(old), p)
	for _, k := range []int{1, 2, 3} {
		l, err := storedFields(ctx, rdb, s.keys[k])
		require.NoError(t, err)
		require.Zero(t, l, s.keys[k])
	}
}

// TestSortedStatsHeldKey: requeueing a dead value of a key held by a nack
// delay counts the same on both engines, and the value is not pullable
// before the hold ends on either.
func TestSortedStatsHeldKey(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	r, err := OpenSorted[int64](ctx, srv.Client(), "held", &SortedOptions{Options: Options{ManualRequeue: true}})
	require.NoError(t, err)
	defer r.Close()
	e, err := queue.OpenSorted[int64](t.TempDir(), &queue.SortedOptions{Options: queue.Options{ManualRequeue: true}})
	require.NoError(t, err)
	defer e.Close()
	for _, q := range []queue.SortedQueue[int64]{r, e} {
		require.NoError(t, q.Publish(ctx, 1, "a", []byte("a1")))
		bs, err := q.TryPull(10)
		require.NoError(t, err)
		require.NoError(t, bs[0].DeadLetter("x"))
		require.NoError(t, q.Publish(ctx, 2, "a", []byte("a2")))
		bs, err = q.TryPull(10)
		require.NoError(t, err)
		require.NoError(t, bs[0].Nack(time.Hour))
		ds, err := q.DeadValues(0, 0)
		require.NoError(t, err)
		require.NoError(t, q.RequeueDead(ds[0].Seq))
		_, err = q.TryPull(10)
		require.ErrorIs(t, err, queue.ErrEmpty)
	}
	require.Equal(t, sortedCounts(e.Stats()), sortedCounts(r.Stats()))
}

// TestRequeueAllDeadWhileDying: RequeueAllDead and PurgeAllDead over
// several pages while a consumer keeps dead-lettering what it pulls lose
// no value and leave no field behind.
func TestRequeueAllDeadWhileDying(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s, err := OpenSorted[int64](ctx, rdb, "dying", nil)
	require.NoError(t, err)
	defer s.Close()
	c, err := OpenSorted[int64](ctx, rdb, "dying", nil)
	require.NoError(t, err)
	defer c.Close()
	const n = 3000
	for i := 0; i < n; i++ {
		require.NoError(t, s.Publish(ctx, int64(i), fmt.Sprint("k", i%50), []byte(fmt.Sprint(i))))
	}
	killAll := func() {
		for {
			bs, err := s.TryPull(1000)
			if err != nil {
				return
			}
			for _, b := range bs {
				require.NoError(t, b.DeadLetter("x"))
			}
		}
	}
	killAll()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			bs, err := c.TryPull(7)
			if err != nil {
				continue
			}
			for _, b := range bs {
				_ = b.DeadLetter("again")
			}
		}
	}()
	total := 0
	for round := 0; round < 5; round++ {
		got, err := s.RequeueAllDead()
		require.NoError(t, err)
		total += got
	}
	close(stop)
	<-done
	st := s.Stats()
	require.Equal(t, n, st.SortedPending+st.SortedDead+st.SortedLeased, "%+v", st)
	vr, err := storedFields(ctx, rdb, s.keys[3])
	require.NoError(t, err)
	require.EqualValues(t, 2*st.SortedDead, vr, "reason and key per dead value")
	killAll()
	p, err := s.PurgeAllDead()
	require.NoError(t, err)
	require.Equal(t, n, p)
	for _, k := range []int{1, 2, 3} {
		l, err := storedFields(ctx, rdb, s.keys[k])
		require.NoError(t, err)
		require.Zero(t, l, s.keys[k])
	}
	t.Logf("requeued %d in 5 rounds", total)
}

// DeadValues listed a dead value whose delivery count was missing or
// garbled (a hash field lost or edited by hand) with a count of 0, and
// nothing in its reason: the parse error was dropped, so the 0 read as a
// count the server kept. It is now listed as a corrupt record: a count of
// 0 and a reason that says which field is wrong.
func TestDeadValueCountDamaged(t *testing.T) {
	s, rdb, ds := deadValues(t, "count-damaged", 4)
	ctx := context.Background()
	seq := func(i int) string { return strconv.FormatUint(ds[i].Seq, 10) }
	require.NoError(t, rdb.HDel(ctx, s.keys[2], seq(0)).Err())
	require.NoError(t, rdb.HSet(ctx, s.keys[2], seq(1), "two").Err())
	require.NoError(t, rdb.HSet(ctx, s.keys[2], seq(2), "-2").Err())
	listed, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	for i, want := range []string{
		"x; " + corruptReason + "delivery count missing",
		"x; " + corruptReason + `delivery count "two" is not a count`,
		"x; " + corruptReason + `delivery count "-2" is not a count`,
	} {
		require.Equal(t, want, listed[i].Reason, "dead value %d", i)
		require.Equal(t, 0, listed[i].Deliveries, "dead value %d", i)
		require.Equal(t, "p", string(listed[i].Payload), "the payload that reads")
	}
	require.Equal(t, "x", listed[3].Reason, "an intact count")
	require.Equal(t, 1, listed[3].Deliveries)
	require.NoError(t, s.RequeueDeadValue(listed[1]), "the value is whole: it can be requeued, its count reset")
	got, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, 1, got[0].Values[0].Deliveries)
}

// deadValues opens the sorted queue name on a server of its own,
// publishes n values (keys k0, k1, ..., payload "p"), pulls and
// dead-letters them all with the reason "x", and returns the queue (closed
// when the test ends), its client and its dead values as listed.
func deadValues(t *testing.T, name string, n int) (*Sorted[int64], *redis.Client, []queue.DeadValue[int64]) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s, err := OpenSorted[int64](ctx, rdb, name, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	for i := range n {
		require.NoError(t, s.Publish(ctx, int64(i), fmt.Sprint("k", i), []byte("p")))
	}
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	for _, b := range bs {
		require.NoError(t, b.DeadLetter("x"))
	}
	ds, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, ds, n)
	return s, rdb, ds
}
