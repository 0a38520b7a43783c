package redisq

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq/internal/redistest"
)

// keyFault is a spoiled key of a queue: key (its position in the
// queue's keys) overwritten with another type, or, with field, that field
// of the key (a counter) set to a value that is no number.
type keyFault struct {
	name  string
	key   int
	field string
}

// keyFaults are the faults of every key in names, then of the counter
// fields of the key at stats.
func keyFaults(names []string, stats int, fields ...string) []keyFault {
	var fs []keyFault
	for i, name := range names {
		fs = append(fs, keyFault{name: name, key: i})
	}
	for _, f := range fields {
		fs = append(fs, keyFault{name: names[stats] + " " + f, key: stats, field: f})
	}
	return fs
}

// spoil saves key (DUMP) and applies the fault to it in one MULTI/EXEC,
// and returns what it saved ("" when the key did not exist). A
// housekeeping pass can run between any two commands of a test: one
// between the save and the fault would have its write undone by the
// restore, and one between a DEL and the SET of the fault would find the
// key missing and write it.
func (f keyFault) spoil(ctx context.Context, t *testing.T, rdb *redis.Client, key string) (saved string) {
	t.Helper()
	return saveAndSpoil(ctx, t, rdb, key, func(p redis.Pipeliner) {
		switch {
		case f.field != "":
			p.HSet(ctx, key, f.field, "abc")
		case f.name == "seq":
			p.Del(ctx, key)
			p.HSet(ctx, key, "x", "1")
		default:
			p.Del(ctx, key)
			p.Set(ctx, key, "x", 0)
		}
	})
}

// saveAndSpoil runs DUMP key, then the commands spoil queues, in one
// MULTI/EXEC, and returns the dump ("" when the key did not exist).
func saveAndSpoil(ctx context.Context, t *testing.T, rdb *redis.Client, key string, spoil func(redis.Pipeliner)) string {
	t.Helper()
	var dump *redis.StringCmd
	cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		dump = p.Dump(ctx, key)
		spoil(p)
		return nil
	})
	if err != nil && err != redis.Nil {
		require.NoError(t, err)
	}
	for _, c := range cmds {
		if c != dump {
			require.NoError(t, c.Err(), "%v", c.Args())
		}
	}
	saved, err := dump.Result()
	if err == redis.Nil {
		return ""
	}
	require.NoError(t, err)
	return saved
}

// TestWrongTypeKey: a key of the queue overwritten with a value of
// another type (a SET by hand, a faulty client), or a counter of its
// stats hash overwritten with what is no number, fails the calls that
// need it, with an error naming that key (and field), and loses nothing,
// also when a damaged record must be buried at the same time: once the
// key is restored, every message comes back once with its own payload. A
// script that failed on it after its first write (a dequeue after its
// pop, an ack after the lease's removal) would leave messages neither
// ready nor leased.
func TestWrongTypeKey(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	names := []string{"seq", "msg", "ready", "delayed", "lease", "dead", "acked", "stats"}
	for _, f := range keyFaults(names, 7, "nacked", "expired", "dead", "purged", "pids") {
		i, name := f.key, f.name
		t.Run(name, func(t *testing.T) {
			clock := queuetest.NewClock()
			q, err := Open(ctx, rdb, "wrongtype-"+name, &Options{Clock: noTimers{clock}, ManualRequeue: true,
				AckTimeout: time.Minute, DedupWindow: time.Hour, restless: true}) // a pass may run between any two steps
			require.NoError(t, err)
			defer q.Close()
			live := map[string]bool{}
			add := func(id string, opts ...queue.EnqueueOption) error {
				_, err := q.Enqueue(ctx, []byte("p-"+id), append(opts, queue.WithID(id))...)
				if err == nil {
					live[id] = true
				}
				return err
			}
			for _, id := range []string{"a", "b", "c", "d", "e", "f", "g"} {
				require.NoError(t, add(id))
			}
			require.NoError(t, add("late", queue.WithDelay(time.Second)))
			leased := map[string]*queue.Message{}
			for range 5 {
				m, err := q.TryDequeue()
				require.NoError(t, err)
				leased[m.ID] = m
			}
			require.NoError(t, leased["c"].DeadLetter("kept dead"))
			clock.Advance(2 * time.Second) // "late" is due
			// Faults come together: "late", the next to be dequeued once
			// promoted, and f have damaged records, so a dequeue buries
			// them (writes to lease, dead and stats) with the key below of
			// the wrong type.
			for _, id := range []string{"late", "f"} {
				seq, err := rdb.HGet(ctx, q.keys[1], "i"+id).Result()
				require.NoError(t, err)
				require.NoError(t, rdb.HSet(ctx, q.keys[1], seq, "not a record").Err())
			}

			key := q.keys[i]
			saved := f.spoil(ctx, t, rdb, key)

			// Every call either works or names the key (and field).
			check := func(what string, err error) bool {
				t.Helper()
				if err != nil {
					require.ErrorContains(t, err, key, what)
					require.ErrorContains(t, err, f.field, what)
				}
				return err == nil
			}
			delivered := func(ms ...*queue.Message) {
				t.Helper()
				for _, m := range ms {
					require.True(t, live[m.ID], "%s delivered while not live", m.ID)
					require.Equal(t, "p-"+m.ID, string(m.Payload))
					if check("ack "+m.ID, m.Ack()) {
						delete(live, m.ID)
					}
				}
			}
			check("enqueue", add("n"))
			_, err = q.EnqueueBatch(ctx, []queue.Item{{ID: "h", Payload: []byte("p-h")}, {ID: "i", Payload: []byte("p-i"), Delay: time.Hour}})
			if check("enqueue batch", err) {
				live["h"], live["i"] = true, true
			}
			if m, err := q.TryDequeue(); err != queue.ErrEmpty && check("dequeue", err) {
				delivered(m)
			}
			bctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			ms, err := q.DequeueBatch(bctx, 3)
			cancel()
			if err != context.DeadlineExceeded && check("dequeue batch", err) {
				delivered(ms...)
			}
			delivered(leased["a"])
			check("nack", leased["b"].Nack(0))
			check("extend", q.Extend(leased["e"].Receipt, time.Minute))
			check("nack by id", q.NackID("d", 0))
			if check("purge", q.PurgeDead("c")) {
				delete(live, "c")
			}
			clock.Advance(time.Hour)
			_, err = q.RequeueExpired()
			check("requeue expired", err)
			_, err = q.RequeueAllDead()
			check("requeue dead", err)

			// Restored, the queue holds every live message once.
			putBack(t, rdb, key, saved)
			clock.Advance(2 * time.Hour)
			_, err = q.RequeueExpired()
			require.NoError(t, err)
			_, err = q.RequeueAllDead()
			require.NoError(t, err)
			var got []string
			for range 2 { // what the first drain buried comes back by the requeue
				for {
					m, err := q.TryDequeue()
					if err == queue.ErrEmpty {
						break
					}
					require.NoError(t, err)
					require.Equal(t, "p-"+m.ID, string(m.Payload))
					got = append(got, m.ID)
					require.NoError(t, m.Ack())
				}
				_, err = q.RequeueAllDead()
				require.NoError(t, err)
			}
			var want []string
			for id := range live {
				want = append(want, id)
			}
			sort.Strings(got)
			sort.Strings(want)
			require.Equal(t, want, got, "every live message comes back once")
		})
	}
}

// TestSortedWrongTypeKey is TestWrongTypeKey for a sorted queue: a pull
// that failed on a key of the wrong type after removing a key's pending
// values would lose them. Key k3 also holds a value past MaxDeliveries
// (given back by a handle with no limit), which a pull dead-letters: it
// ends dead with its reason, never delivered, whichever key was spoiled.
func TestSortedWrongTypeKey(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	names := []string{"seq", "val", "vinfo", "vreason", "pend", "order", "pos", "batch", "bdue", "flight", "hold", "dead", "stats", "age"}
	faults := keyFaults(names, 12, "published", "pulled", "acked", "leased")
	faults = append(faults, keyFault{name: "flight k1", key: 9, field: "k1"}, keyFault{name: "flight k5", key: 9, field: "k5"})
	for _, f := range faults {
		i, name := f.key, f.name
		t.Run(name, func(t *testing.T) {
			clock := queuetest.NewClock()
			open := func(maxd int) *Sorted[int64] {
				s, err := OpenSorted[int64](ctx, rdb, "wrongtype-sorted-"+name, &SortedOptions{SingleFlight: true,
					Options: Options{Clock: noTimers{clock}, ManualRequeue: true, AckTimeout: time.Minute, MaxDeliveries: maxd,
						restless: true}}) // a pass may run between any two steps
				require.NoError(t, err)
				t.Cleanup(func() { _ = s.Close() })
				return s
			}
			loose, s := open(-1), open(3)
			require.NoError(t, loose.Publish(ctx, 1, "k3", []byte("past"))) // seq 1
			for range 3 {
				bs, err := loose.TryPull(10)
				require.NoError(t, err)
				require.NoError(t, bs[0].Nack(0))
			}
			live := map[string]bool{}
			publish := func(k, v string) error {
				err := s.Publish(ctx, 1, k, []byte(v))
				if err == nil {
					live[v] = true
				}
				return err
			}
			for _, kv := range [][2]string{{"k1", "a"}, {"k1", "b"}, {"k2", "c"}, {"k3", "d"}, {"k4", "e"}} {
				require.NoError(t, publish(kv[0], kv[1]))
			}
			bs, err := s.TryPull(2)
			require.NoError(t, err)
			require.Len(t, bs, 1) // k1, two values
			held, err := s.TryPull(1)
			require.NoError(t, err)
			require.NoError(t, held[0].Nack(time.Hour)) // k2 held
			// Faults come together: k1's batch record is garbled (its copy
			// still names the values).
			require.NoError(t, rdb.HSet(ctx, s.keys[7], strconv.FormatUint(bs[0].Receipt.Lease, 10), "garbled").Err())

			key := s.keys[i]
			saved := f.spoil(ctx, t, rdb, key)
			check := func(what string, err error) bool {
				t.Helper()
				if err != nil {
					require.ErrorContains(t, err, key, what)
					require.ErrorContains(t, err, f.field, what)
				}
				return err == nil
			}
			settle := func(bs []*queue.Batch[int64]) {
				t.Helper()
				for _, b := range bs {
					for _, v := range b.Values {
						require.True(t, live[string(v.Payload)], "%s delivered while not live", v.Payload)
					}
					if check("ack", b.Ack()) {
						for _, v := range b.Values {
							delete(live, string(v.Payload))
						}
					}
				}
			}
			check("publish", publish("k5", "f"))
			got, err := s.TryPull(10)
			if err != queue.ErrEmpty && check("pull", err) {
				settle(got)
			}
			settle(bs)
			clock.Advance(2 * time.Hour)
			_, err = s.RequeueExpired()
			check("requeue expired", err)

			putBack(t, rdb, key, saved)
			clock.Advance(2 * time.Hour)
			_, err = s.RequeueExpired()
			require.NoError(t, err)
			var back []string
			for {
				got, err := s.TryPull(10)
				if err == queue.ErrEmpty {
					break
				}
				require.NoError(t, err)
				for _, b := range got {
					for _, v := range b.Values {
						back = append(back, string(v.Payload))
					}
					require.NoError(t, b.Ack())
				}
			}
			var want []string
			for v := range live {
				want = append(want, v)
			}
			sort.Strings(back)
			sort.Strings(want)
			require.Equal(t, want, back, "every live value comes back once")
			dead, err := rdb.ZRange(ctx, s.keys[11], 0, -1).Result()
			require.NoError(t, err)
			require.Equal(t, []string{"1"}, dead, "the value past the limit is dead")
			ds, err := s.DeadValues(0, 0)
			require.NoError(t, err)
			require.Len(t, ds, 1)
			require.Equal(t, "3 deliveries, limit 3; not delivered again", ds[0].Reason)
			require.Equal(t, "k3", ds[0].Key, "the dead value's key is recorded")
		})
	}
}

// TestHousekeepBesideWrongType: a key of the wrong type that
// housekeeping never touches (the ack queue's seq and dedup stamps, a
// sorted queue's values) does not stop it: leases still end.
func TestHousekeepBesideWrongType(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	for _, i := range []int{0, 6} { // seq, acked
		t.Run("ack "+strconv.Itoa(i), func(t *testing.T) {
			clock := queuetest.NewClock()
			q, err := Open(ctx, rdb, "housekeep-beside-"+strconv.Itoa(i), &Options{Clock: noTimers{clock}, ManualRequeue: true,
				AckTimeout: time.Minute, DedupWindow: time.Hour})
			require.NoError(t, err)
			defer q.Close()
			_, err = q.Enqueue(ctx, []byte("p"), queue.WithID("a"))
			require.NoError(t, err)
			_, err = q.TryDequeue()
			require.NoError(t, err)
			require.NoError(t, rdb.Del(ctx, q.keys[i]).Err())
			require.NoError(t, rdb.HSet(ctx, q.keys[i], "x", "1").Err())
			clock.Advance(time.Hour)
			n, err := q.RequeueExpired()
			require.NoError(t, err)
			require.Equal(t, 1, n)
			m, err := q.TryDequeue() // ready again
			require.NoError(t, err)
			require.Equal(t, "a", m.ID)
		})
	}
	t.Run("sorted val", func(t *testing.T) {
		clock := queuetest.NewClock()
		s, err := OpenSorted[int64](ctx, rdb, "housekeep-beside-sorted", &SortedOptions{
			Options: Options{Clock: noTimers{clock}, ManualRequeue: true, AckTimeout: time.Minute}})
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, s.Publish(ctx, 1, "k1", []byte("v1")))
		_, err = s.TryPull(10)
		require.NoError(t, err)
		saved := keyFault{name: "values"}.spoil(ctx, t, rdb, s.keys[1])
		require.NotEmpty(t, saved)
		clock.Advance(time.Hour)
		n, err := s.RequeueExpired()
		require.NoError(t, err)
		require.Equal(t, 1, n)
		putBack(t, rdb, s.keys[1], saved)
		bs, err := s.TryPull(10)
		require.NoError(t, err)
		require.Len(t, bs, 1)
		require.Equal(t, []byte("v1"), bs[0].Values[0].Payload)
	})
}

// TestWrongTypeFirstEnqueue: the first enqueue of a queue also writes
// the placeholders of its hot keys (keep in scripts/common.lua); with the
// lease key of the wrong type it fails naming that key, consumes no seq,
// and the first enqueue after the key's repair writes the placeholders.
func TestWrongTypeFirstEnqueue(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	for _, batch := range []bool{false, true} {
		t.Run(strconv.FormatBool(batch), func(t *testing.T) {
			q, err := Open(ctx, rdb, "first-enqueue-"+strconv.FormatBool(batch), &Options{ManualRequeue: true})
			require.NoError(t, err)
			defer q.Close()
			enqueue := func() error {
				if batch {
					_, err := q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("a")}, {Payload: []byte("b")}})
					return err
				}
				_, err := q.Enqueue(ctx, []byte("a"))
				return err
			}
			lease := q.keys[4]
			require.NoError(t, rdb.Set(ctx, lease, "x", 0).Err())
			require.ErrorContains(t, enqueue(), lease)
			n, err := rdb.Exists(ctx, q.keys[0]).Result()
			require.NoError(t, err)
			if n > 0 {
				seq, err := rdb.Get(ctx, q.keys[0]).Result()
				require.NoError(t, err)
				require.Equal(t, "0", seq, "no seq consumed")
			}
			require.NoError(t, rdb.Del(ctx, lease).Err())
			require.NoError(t, enqueue())
			m, err := q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, uint64(1), m.Receipt.Seq)
			require.NoError(t, m.Ack())
			for _, k := range []string{q.keys[2], q.keys[4]} {
				n, err := rdb.ZCard(ctx, k).Result()
				require.NoError(t, err)
				require.NotZero(t, n, "%s keeps its placeholder", k)
			}
		})
	}
}

// TestWrongTypeDelayedBehindBurial: with the earliest delayed message
// not yet due, a dequeue does not read the delayed key until a burial has
// emptied the ready set and it promotes. A delayed key of the wrong type
// must then fail the call before anything is written: a sound message
// leased in the same batch, or a damaged one, is found where it was once
// the key is restored.
func TestWrongTypeDelayedBehindBurial(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		ids   []string // enqueued in order; the last is damaged
		take  func(q *Queue) (int, error)
		sound []string // delivered once the key is restored
	}{
		{"batch", []string{"a", "b"}, func(q *Queue) (int, error) {
			ms, err := q.DequeueBatch(ctx, 3)
			return len(ms), err
		}, []string{"a"}},
		{"lone", []string{"b"}, func(q *Queue) (int, error) {
			_, err := q.TryDequeue()
			return 0, err
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := queuetest.NewClock()
			q, err := Open(ctx, rdb, "wrongtype-behind-"+tc.name, &Options{Clock: noTimers{clock},
				ManualRequeue: true, AckTimeout: time.Minute, DedupWindow: time.Hour})
			require.NoError(t, err)
			defer q.Close()
			_, err = q.Enqueue(ctx, []byte("p-late"), queue.WithID("late"), queue.WithDelay(time.Hour))
			require.NoError(t, err)
			for _, id := range tc.ids {
				_, err := q.Enqueue(ctx, []byte("p-"+id), queue.WithID(id))
				require.NoError(t, err)
			}
			bad := tc.ids[len(tc.ids)-1]
			seq, err := rdb.HGet(ctx, q.keys[1], "i"+bad).Result()
			require.NoError(t, err)
			require.NoError(t, rdb.HSet(ctx, q.keys[1], seq, "not a record").Err())
			key := q.keys[3]
			saved := keyFault{name: "dead"}.spoil(ctx, t, rdb, key)
			require.NotEmpty(t, saved)

			n, err := tc.take(q)
			require.Error(t, err)
			require.Contains(t, err.Error(), key)
			require.Zero(t, n)

			putBack(t, rdb, key, saved)
			st, err := q.StatsContext(ctx)
			require.NoError(t, err)
			require.Zero(t, st.Dead, "nothing buried by a call that failed")
			require.Equal(t, int64(len(tc.ids)), st.Ready, "every popped message back in ready")
			var got []string
			for {
				m, err := q.TryDequeue()
				if err != nil {
					require.ErrorIs(t, err, queue.ErrEmpty)
					break
				}
				got = append(got, m.ID)
				require.NoError(t, m.Ack())
			}
			require.Equal(t, tc.sound, got)
			st, err = q.StatsContext(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(1), st.Dead, "the damaged message buried once")
			require.Equal(t, int64(1), st.Delayed)
		})
	}
}

// TestWrongTypeAckedWithoutWindow: a handle without a dedup window
// removes the stamps of the producer ids it enqueues, so a stamps key of
// the wrong type fails such an enqueue, naming the key, with nothing
// written (no message field, no sequence number); an enqueue with
// generated ids does not touch the stamps.
func TestWrongTypeAckedWithoutWindow(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	q, err := Open(ctx, rdb, "wrongtype-acked-nowindow", &Options{ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("g0"))
	require.NoError(t, err)
	written := func() (map[string]string, string) {
		t.Helper()
		msg, err := rdb.HGetAll(ctx, q.keys[1]).Result()
		require.NoError(t, err)
		for f := range msg {
			if strings.HasPrefix(f, "#") {
				delete(msg, f) // the queue's own marks, which housekeeping rewrites
			}
		}
		seq, err := rdb.Get(ctx, q.keys[0]).Result()
		require.NoError(t, err)
		return msg, seq
	}
	msg, seq := written()
	require.NoError(t, rdb.Set(ctx, q.keys[6], "x", 0).Err())
	calls := map[string]func() error{
		"batch of one": func() error { _, err := q.EnqueueBatch(ctx, []queue.Item{{ID: "a"}}); return err },
		"batch":        func() error { _, err := q.EnqueueBatch(ctx, []queue.Item{{ID: "a"}, {}}); return err },
		"lone":         func() error { _, err := q.Enqueue(ctx, []byte("p"), queue.WithID("a")); return err },
	}
	for name, call := range calls {
		require.ErrorContains(t, call(), q.keys[6], name)
		msgAfter, seqAfter := written()
		require.Equal(t, msg, msgAfter, "%s: no message field written", name)
		require.Equal(t, seq, seqAfter, "%s: no sequence number taken", name)
	}
	require.EqualValues(t, 1, q.Stats().Ready, "nothing made ready")
	_, err = q.Enqueue(ctx, []byte("g"))
	require.NoError(t, err)
	require.NoError(t, rdb.Del(ctx, q.keys[6]).Err())
	_, err = q.Enqueue(ctx, []byte("p"), queue.WithID("a"))
	require.NoError(t, err)
	require.EqualValues(t, 3, q.Stats().Ready)
}

// TestWrongTypeKeepsStamps: an enqueue by a handle with a window forgets
// the stamps older than that window, a write; a key of the wrong type
// that fails the enqueue must fail it before that write, so that a
// handle with a longer window still refuses the ids whose stamps the
// failed call would have forgotten (its error says the queue is left as
// it was). An enqueue that needs no key of the fault works, and forgets
// the stamp past its window as any enqueue does.
func TestWrongTypeKeepsStamps(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	calls := []struct {
		name string
		call func(q *Queue) error
	}{
		{"lone", func(q *Queue) error { _, err := q.Enqueue(ctx, []byte("p")); return err }},
		{"lone-id", func(q *Queue) error { _, err := q.Enqueue(ctx, []byte("p"), queue.WithID("y")); return err }},
		{"batch", func(q *Queue) error {
			_, err := q.EnqueueBatch(ctx, []queue.Item{{ID: "y", Payload: []byte("p")}, {Payload: []byte("p"), Delay: time.Hour}})
			return err
		}},
	}
	// works lists the calls that need no key of the fault: no enqueue
	// reads lease or dead, one with no delay does not read delayed, and
	// stats counts only producer ids.
	works := map[string]bool{"delayed/lone": true, "lease/lone": true, "lease/lone-id": true, "lease/batch": true,
		"dead/lone": true, "dead/lone-id": true, "dead/batch": true, "stats/lone": true, "stats pids/lone": true}
	names := []string{"seq", "msg", "ready", "delayed", "lease", "dead", "acked", "stats"}
	for _, f := range keyFaults(names, 7, "pids") {
		if f.name == "acked" {
			continue // the stamps themselves
		}
		for _, c := range calls {
			t.Run(f.name+"/"+c.name, func(t *testing.T) {
				clock := queuetest.NewClock()
				open := func(window time.Duration) *Queue {
					q, err := Open(ctx, rdb, "wrongtype-stamps-"+f.name+"-"+c.name, &Options{Clock: noTimers{clock},
						ManualRequeue: true, AckTimeout: time.Hour, DedupWindow: window})
					require.NoError(t, err)
					t.Cleanup(func() { _ = q.Close() })
					return q
				}
				long, short := open(time.Hour), open(time.Minute)
				_, err := long.Enqueue(ctx, []byte("p-x"), queue.WithID("x"))
				require.NoError(t, err)
				m, err := long.TryDequeue()
				require.NoError(t, err)
				require.NoError(t, m.Ack())
				clock.Advance(2 * time.Minute)

				key := long.keys[f.key]
				saved := f.spoil(ctx, t, rdb, key)
				err = c.call(short)
				stamps, zerr := rdb.ZCard(ctx, long.keys[6]).Result()
				require.NoError(t, zerr)
				if works[f.name+"/"+c.name] {
					require.NoError(t, err, "the call needs no %s", key)
					require.Zero(t, stamps, "the enqueue forgot the stamp past its window")
					return
				}
				require.ErrorContains(t, err, key)
				require.EqualValues(t, 1, stamps, "the refused call forgot no stamp (%v)", err)

				putBack(t, rdb, key, saved)
				_, err = long.Enqueue(ctx, []byte("p-x"), queue.WithID("x"))
				require.ErrorIs(t, err, queue.ErrDuplicate, "acked within the long window")
			})
		}
	}
}

// TestWrongTypeFewEnqueue: a call enqueuing a few messages with
// generated ids, ready at once (concurrent Enqueues, a small batch),
// probes no key first; with seq, msg or ready of the wrong type it fails
// naming that key, and once the key is restored the queue holds what it
// held before, under the same seqs: the failed call took back its
// writes.
func TestWrongTypeFewEnqueue(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	for i, name := range []string{"seq", "msg", "ready"} {
		t.Run(name, func(t *testing.T) {
			q, err := Open(ctx, rdb, "few-"+name, &Options{ManualRequeue: true})
			require.NoError(t, err)
			defer q.Close()
			items := func(ps ...string) []queue.Item {
				var its []queue.Item
				for _, p := range ps {
					its = append(its, queue.Item{Payload: []byte(p)})
				}
				return its
			}
			_, err = q.EnqueueBatch(ctx, items("a", "b"))
			require.NoError(t, err)
			key := q.keys[i]
			saved := keyFault{name: name, key: i}.spoil(ctx, t, rdb, key)
			require.NotEmpty(t, saved)
			_, err = q.EnqueueBatch(ctx, items("x", "y", "z"))
			require.ErrorContains(t, err, key)

			putBack(t, rdb, key, saved)
			_, err = q.EnqueueBatch(ctx, items("c", "d"))
			require.NoError(t, err)
			var got []string
			for {
				m, err := q.TryDequeue()
				if err == queue.ErrEmpty {
					break
				}
				require.NoError(t, err)
				got = append(got, fmt.Sprintf("%d:%s", m.Receipt.Seq, m.Payload))
				require.NoError(t, m.Ack())
			}
			require.Equal(t, []string{"1:a", "2:b", "3:c", "4:d"}, got)
			dead, err := rdb.ZCard(ctx, q.keys[5]).Result()
			require.NoError(t, err)
			require.Zero(t, dead, "nothing left of the failed call to bury")
		})
	}
}

// putBack gives key its saved value (a DUMP; "" for none) in one
// command: a housekeeping pass that runs meanwhile must not find it
// missing and write to it, which a DEL then RESTORE would let it do.
func putBack(t *testing.T, rdb redis.UniversalClient, key, saved string) {
	t.Helper()
	ctx := context.Background()
	if saved == "" {
		require.NoError(t, rdb.Del(ctx, key).Err())
		return
	}
	require.NoError(t, rdb.RestoreReplace(ctx, key, 0, saved).Err())
}
