package redisq

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestSortedCorruptValue: a pulled batch holding a value whose body does
// not decode is dead-lettered whole (a batch is settled whole), with a
// reason saying its record is corrupt; the other batches of the pull
// are delivered. Without that the pull failed while its batches stayed
// leased, and failed again at every redelivery.
func TestSortedCorruptValue(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s, err := OpenSorted[int64](ctx, rdb, "corrupt-sorted", &SortedOptions{Options: Options{ManualRequeue: true}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "k1", []byte("a")))
	require.NoError(t, s.Publish(ctx, 2, "k2", []byte("b")))
	require.NoError(t, rdb.HSet(ctx, s.keys[1], "1", "\xc1").Err())

	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.Equal(t, "k2", bs[0].Key)
	require.NoError(t, bs[0].Ack())
	st := s.Stats()
	require.Equal(t, [3]int{0, 0, 1}, [3]int{st.SortedPending, st.SortedBatches, st.SortedDead})
	why, err := rdb.HGet(ctx, s.keys[3], "1").Result()
	require.NoError(t, err)
	require.Contains(t, why, "corrupt record: value 1 undecodable")
}

// TestSortedCorruptInfo: a batch whose value lost its delivery count is
// given back (nack, expiry) without failing halfway: that value goes
// back to its key with the others (TestSortedMissingCountGivenBack); and
// a batch whose own record is garbled stops no housekeeping pass and
// comes back from the record's copy (TestSortedGarbledBatchBack).
func TestSortedCorruptInfo(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	clock := queuetest.NewClock()
	s, err := OpenSorted[int64](ctx, rdb, "corrupt-info", &SortedOptions{Options: Options{Clock: clock, AckTimeout: time.Minute, ManualRequeue: true}})
	require.NoError(t, err)
	defer s.Close()
	for i, k := range []string{"k1", "k1", "k2", "k3"} {
		require.NoError(t, s.Publish(ctx, int64(i), k, []byte(k)))
	}
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 3)
	require.NoError(t, rdb.HDel(ctx, s.keys[2], "1").Err())
	require.NoError(t, bs[0].Nack(0), "the nack of k1's batch")
	st := s.Stats()
	require.Equal(t, [2]int{2, 0}, [2]int{st.SortedPending, st.SortedDead}, "values 1 and 2 pending again")

	require.NoError(t, rdb.HSet(ctx, s.keys[7], strconv.FormatUint(bs[1].Receipt.Lease, 10), "\xc1").Err())
	clock.Advance(2 * time.Minute)
	n, err := s.RequeueExpired()
	require.NoError(t, err)
	require.Equal(t, 2, n)
	bs, err = s.TryPull(10)
	require.NoError(t, err)
	var keys []string
	for _, b := range bs {
		keys = append(keys, b.Key)
	}
	sort.Strings(keys)
	require.Equal(t, []string{"k1", "k2", "k3"}, keys, "the leases ended and the values are back, k2's read from its record's copy")
}

// TestSortedMissingCountGivenBack: a value whose delivery count is gone
// is still deliverable (its body and sort key are intact): a nack gives
// it back to its key, and the next pull counts its deliveries afresh,
// with or without MaxDeliveries. The sorted dead set has no requeue, so
// dead there it would be lost to the application. Without a delivery
// limit a giveback reads no count at all: no HGET per value.
func TestSortedMissingCountGivenBack(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	for _, c := range []struct{ damage, count string }{{"missing", ""}, {"garbled", "garbled"}} {
		for _, maxd := range []int{-1, 3} { // -1: no limit
			t.Run(c.damage+"/MaxDeliveries="+strconv.Itoa(maxd), func(t *testing.T) {
				testSortedDamagedCount(t, rdb, c.damage, c.count, maxd)
			})
		}
	}
}

// testSortedDamagedCount publishes five values, pulls them, damages the
// second one's delivery count (deletes it when count is empty, else sets
// it to count) and nacks: every value must come back and be pulled again
// together.
func testSortedDamagedCount(t *testing.T, rdb *redis.Client, damage, count string, maxd int) {
	t.Helper()
	ctx := context.Background()
	s, err := OpenSorted[int64](ctx, rdb, damage+"-count-"+strconv.Itoa(maxd),
		&SortedOptions{Options: Options{MaxDeliveries: maxd, ManualRequeue: true}})
	require.NoError(t, err)
	defer s.Close()
	for i := range 5 {
		require.NoError(t, s.Publish(ctx, int64(i), "k", []byte{byte('a' + i)}))
	}
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	if count == "" {
		require.NoError(t, rdb.HDel(ctx, s.keys[2], "1").Err())
	} else {
		require.NoError(t, rdb.HSet(ctx, s.keys[2], "1", count).Err())
	}
	before := hgets(t, rdb)
	require.NoError(t, bs[0].Nack(0))
	if maxd < 0 {
		// heldReads: the call's look at the placeholders (held, scripts/sorted.lua).
		require.Less(t, hgets(t, rdb)-before, int64(heldReads+5), "an HGET per value given back")
	}
	st := s.Stats()
	require.Equal(t, [2]int{5, 0}, [2]int{st.SortedPending, st.SortedDead}, "every value is back at its key")
	bs, err = s.TryPull(10)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.Len(t, bs[0].Values, 5)
	require.NoError(t, bs[0].Ack())
}

// hgets is the server's count of HGET calls so far, those of scripts
// included.
func hgets(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_hget:calls="); ok {
			n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	return 0
}

// TestSortedGarbledBatchDecodes: a batch's record is kept twice so that a
// garbled one does not lose its values; a record garbled in a way that
// still decodes (another key, a seq that names no value) must not beat
// its sound copy, whichever settles the batch (an ack, a nack, the end
// of its lease): the values go back to their key, or go, as the copy
// says. Read from the garbled record, a nack put back values no pull
// could lease, or left the key out of the pull order, and an ack
// removed no values, or another key's.
func TestSortedGarbledBatchDecodes(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	garbles := map[string]func(rec []any){
		"key": func(rec []any) { rec[0] = "k2" },
		"seq": func(rec []any) {
			ms := rec[1].([]any)
			m := []byte(ms[1].(string))
			copy(m[len(m)-8:], "\x00\x00\x00\x00\x00\x00\x03\xe7") // seq 999
			ms[1] = string(m)
		},
		"other key's values": func(rec []any) { rec[1] = []any{rec[1].([]any)[0]}; rec[0] = "k1" },
	}
	for name, garble := range garbles {
		for _, settle := range []string{"ack", "nack", "expiry"} {
			t.Run(name+"/"+settle, func(t *testing.T) {
				clock := queuetest.NewClock()
				s, err := OpenSorted[int64](ctx, rdb, "garbled-decodes-"+name+"-"+settle, &SortedOptions{SingleFlight: true,
					Options: Options{Clock: noTimers{clock}, AckTimeout: time.Minute, ManualRequeue: true}})
				require.NoError(t, err)
				defer s.Close()
				for i, kv := range [][2]string{{"k1", "a"}, {"k1", "b"}, {"k2", "c"}} {
					require.NoError(t, s.Publish(ctx, int64(i), kv[0], []byte(kv[1])))
				}
				bs, err := s.TryPull(10)
				require.NoError(t, err)
				require.Len(t, bs, 2)
				k1, k2 := bs[0], bs[1]
				require.Equal(t, "k1", k1.Key)
				// The record of k1's batch, garbled; for "other key's
				// values" it names k2's value under k1.
				src := k1
				if name == "other key's values" {
					src = k2
				}
				raw, err := rdb.HGet(ctx, s.keys[7], "c"+strconv.FormatUint(src.Receipt.Lease, 10)).Result()
				require.NoError(t, err)
				var rec []any
				require.NoError(t, msgpack.Unmarshal([]byte(raw), &rec))
				garble(rec)
				b, err := msgpack.Marshal(rec)
				require.NoError(t, err)
				require.NoError(t, rdb.HSet(ctx, s.keys[7], strconv.FormatUint(k1.Receipt.Lease, 10), b).Err())

				want := []string{"a", "b", "c"}
				switch settle {
				case "ack":
					require.NoError(t, k1.Ack())
					want = []string{"c"}
				case "nack":
					require.NoError(t, k1.Nack(0))
				case "expiry":
					clock.Advance(2 * time.Minute)
					_, err := s.RequeueExpired()
					require.NoError(t, err)
				}
				if settle != "expiry" {
					require.NoError(t, k2.Nack(0))
				}
				var got []string
				for {
					bs, err := s.TryPull(10)
					if err == queue.ErrEmpty {
						break
					}
					require.NoError(t, err)
					for _, b := range bs {
						for _, v := range b.Values {
							got = append(got, string(v.Payload))
						}
						require.NoError(t, b.Ack())
					}
				}
				sort.Strings(got)
				require.Equal(t, want, got, "the values as the sound copy says")
				require.Zero(t, s.Stats().SortedDead)
			})
		}
	}
}

// TestSortedFlightCountFloat: a key's count of leased batches that is no
// count, as HINCRBY reads one ("1e3" included, which Lua's tonumber
// takes), counts as none under single flight: the key stays pullable.
func TestSortedFlightCountFloat(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	for _, garble := range []string{"abc", "1e3"} {
		t.Run(garble, func(t *testing.T) {
			s, err := OpenSorted[string](ctx, rdb, "fl-"+garble, &SortedOptions{SingleFlight: true, Options: Options{TrustServer: true}})
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, s.Publish(ctx, "a", "k1", []byte("v1")))
			require.NoError(t, rdb.HSet(ctx, s.keys[9], "k1", garble).Err())
			require.NoError(t, s.Publish(ctx, "b", "k1", []byte("v2")))
			bs, err := s.TryPull(10)
			require.NoError(t, err, "k1 has two pending values and no batch out")
			require.Len(t, bs, 1)
		})
	}
}

// TestSortedFlightCountWide: a count of leased batches of 19 digits is
// one HINCRBY adds to, so it counts as it reads under single flight: the
// key has a batch out and a second one is not pulled.
func TestSortedFlightCountWide(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	s, err := OpenSorted[string](ctx, rdb, "fl-wide", &SortedOptions{SingleFlight: true, Options: Options{TrustServer: true}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, rdb.HSet(ctx, s.keys[9], "k1", "1000000000000000000").Err())
	require.NoError(t, s.Publish(ctx, "a", "k1", []byte("v1")))
	_, err = s.TryPull(10)
	require.ErrorIs(t, err, queue.ErrEmpty, "k1 has a batch out")
	require.Equal(t, "1000000000000000000", rdb.HGet(ctx, s.keys[9], "k1").Val())
}

// TestSortedFlightCountMax: a count of leased batches HINCRBY cannot add
// 1 to (at either end of a 64-bit integer) counts as none and is reset
// by the pull, which leases the key's values whole: each is delivered to
// the consumer it is counted for, and its ack leaves no count behind.
func TestSortedFlightCountMax(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	for _, garble := range []string{"9223372036854775807", "-9223372036854775808"} {
		t.Run(garble, func(t *testing.T) {
			opts := &SortedOptions{SingleFlight: true, Options: Options{TrustServer: true, MaxDeliveries: 1}}
			s, err := OpenSorted[string](ctx, rdb, "fl-max"+garble[:1], opts)
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, rdb.HSet(ctx, s.keys[9], "k1", garble).Err())
			require.NoError(t, s.Publish(ctx, "a", "k1", []byte("v1")))
			bs, err := s.TryPull(10)
			require.NoError(t, err)
			require.Len(t, bs, 1)
			require.Equal(t, "1", rdb.HGet(ctx, s.keys[9], "k1").Val())
			require.NoError(t, s.Ack(bs[0].Receipt))
			require.Zero(t, rdb.HExists(ctx, s.keys[9], "k1").Val())
			st, err := s.StatsContext(ctx)
			require.NoError(t, err)
			require.Zero(t, st.SortedDead)
			require.Zero(t, st.SortedPending)
		})
	}
}

// TestSortedStatsTotalsNeverWrap: a sorted queue's lifetime total that
// reads below zero (written by hand) is reported as 0, never as a count
// near 2^64, and CountsErr, wrapping queue.ErrCorrupt, names it; the
// other totals stay as they are.
func TestSortedStatsTotalsNeverWrap(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s, err := OpenSorted[int64](ctx, rdb, "nowrap-sorted", &SortedOptions{Options: Options{ManualRequeue: true}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Publish(ctx, 1, "k1", []byte("a")))
	require.NoError(t, s.Publish(ctx, 2, "k2", []byte("b")))
	bs, err := s.TryPull(1)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.NoError(t, bs[0].Ack())
	st, err := s.StatsContext(ctx)
	require.NoError(t, err)
	require.NoError(t, st.CountsErr, "before the damage")
	require.Equal(t, "walq:{nowrap-sorted}:s:stats", s.keys[12])
	require.NoError(t, rdb.HSet(ctx, s.keys[12], "published", -5).Err())
	st, err = s.StatsContext(ctx)
	require.NoError(t, err)
	require.Zero(t, st.Published, "%+v", st)
	require.Equal(t, [2]uint64{1, 1}, [2]uint64{st.Pulled, st.BatchesAcked}, "%+v", st)
	require.ErrorIs(t, st.CountsErr, queue.ErrCorrupt)
	require.ErrorContains(t, st.CountsErr, "published reads -5")
}
