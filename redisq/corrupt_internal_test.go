package redisq

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq/internal/redistest"
)

// corruptions damage the stored message seq of q the ways a hand edit or a
// faulty client can: each says what the dead letter's reason names and
// whether the message's id can still be told.
var corruptions = []struct {
	name   string
	reason string
	damage func(ctx context.Context, rdb *redis.Client, q *Queue, seq string) error
}{
	{"record overwritten", "corrupt record: unreadable", func(ctx context.Context, rdb *redis.Client, q *Queue, seq string) error {
		return rdb.HSet(ctx, q.keys[1], seq, "not a record").Err()
	}},
	{"record id past its end", "corrupt record: unreadable", func(ctx context.Context, rdb *redis.Client, q *Queue, seq string) error {
		return rdb.HSet(ctx, q.keys[1], seq, "0:0::99:short").Err()
	}},
	{"record deleted", "corrupt record: missing", func(ctx context.Context, rdb *redis.Client, q *Queue, seq string) error {
		return rdb.HDel(ctx, q.keys[1], seq).Err()
	}},
	{"body deleted", "corrupt record: body missing", func(ctx context.Context, rdb *redis.Client, q *Queue, seq string) error {
		return rdb.HDel(ctx, q.keys[1], "b"+seq).Err()
	}},
	{"body undecodable", "corrupt record: payload undecodable", func(ctx context.Context, rdb *redis.Client, q *Queue, seq string) error {
		return rdb.HSet(ctx, q.keys[1], "b"+seq, "\xc1").Err()
	}},
}

// TestCorruptRecordDequeue: a ready message whose stored record cannot be
// read is not delivered and not lost: every way of leasing (a lone
// Dequeue, a batch, lone Dequeues gathered into one call) moves it to the
// dead-letter set, with a reason saying its record is corrupt, and
// delivers the other messages of the call. A script error after its pop
// would leave it neither ready nor leased.
func TestCorruptRecordDequeue(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	takes := []struct {
		name string
		take func(t *testing.T, q *Queue) []*queue.Message
	}{
		{"lone", func(t *testing.T, q *Queue) []*queue.Message {
			var out []*queue.Message
			for {
				m, err := q.TryDequeue()
				if err != nil {
					require.ErrorIs(t, err, queue.ErrEmpty)
					return out
				}
				out = append(out, m)
			}
		}},
		{"batch", func(t *testing.T, q *Queue) []*queue.Message {
			ms, err := q.DequeueBatch(ctx, 3)
			require.NoError(t, err)
			return ms
		}},
		{"gathered", func(t *testing.T, q *Queue) []*queue.Message {
			reqs := []*leaseReq{{p: newPresence(ctx)}, {p: newPresence(ctx)}, {p: newPresence(ctx)}}
			for _, err := range q.leaseEach(reqs) {
				require.NoError(t, err)
			}
			var out []*queue.Message
			for _, r := range reqs {
				if r.m != nil {
					out = append(out, r.m)
				}
			}
			return out
		}},
	}
	for i, c := range corruptions {
		for _, tk := range takes {
			t.Run(c.name+"/"+tk.name, func(t *testing.T) {
				q, err := Open(ctx, rdb, "corrupt-"+strconv.Itoa(i)+"-"+tk.name, nil)
				require.NoError(t, err)
				defer q.Close()
				ids, err := q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("a")}, {Payload: []byte("b")}, {Payload: []byte("c")}})
				require.NoError(t, err)
				require.NoError(t, c.damage(ctx, rdb, q, "2"))

				ms := tk.take(t, q)
				var got []string
				for _, m := range ms {
					got = append(got, string(m.Payload))
				}
				sort.Strings(got)
				require.Equal(t, []string{"a", "c"}, got, "the sound messages of the call are delivered")
				for _, m := range ms {
					require.NoError(t, m.Ack(), "each delivered message's receipt is its own")
				}
				s := q.Stats()
				require.Equal(t, [3]int64{0, 0, 1}, [3]int64{s.Ready, s.InFlight, s.Dead}, "the corrupt message is dead, not lost")
				dl, err := q.DeadLetters(0, 10)
				require.NoError(t, err)
				require.Len(t, dl, 1)
				require.Equal(t, uint64(2), dl[0].Seq)
				require.Contains(t, dl[0].Reason, c.reason)
				if c.name != "record id past its end" {
					require.Equal(t, ids[1], dl[0].ID, "the id is told from the record or the body")
				}
				n, err := q.PurgeAllDead()
				require.NoError(t, err)
				require.Equal(t, 1, n)
				requireNoMessageLeft(t, rdb, q)
			})
		}
	}
}

// TestCorruptRecordLeased: a leased message whose record is damaged
// stops neither the housekeeper nor anything else: at its deadline it
// goes to the dead-letter set, and the other expired leases end as
// usual; a settle by its id finds no delivery.
func TestCorruptRecordLeased(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	clock := queuetest.NewClock()
	q, err := Open(ctx, rdb, "corrupt-leased", &Options{Clock: clock, AckTimeout: time.Minute, ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	ids, err := q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("a")}, {Payload: []byte("b")}})
	require.NoError(t, err)
	ms, err := q.DequeueBatch(ctx, 2)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	require.NoError(t, rdb.HSet(ctx, q.keys[1], "1", "not a record").Err())

	require.ErrorIs(t, q.AckID(ids[0]), queue.ErrNotFound)
	require.ErrorIs(t, ms[0].Ack(), queue.ErrLeaseLost)
	clock.Advance(2 * time.Minute)
	n, err := q.RequeueExpired()
	require.NoError(t, err)
	require.Equal(t, 2, n)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "b", string(m.Payload))
	require.NoError(t, m.Ack())
	dl, err := q.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, dl, 1)
	require.Equal(t, ids[0], dl[0].ID)
	require.Equal(t, "a", string(dl[0].Payload))
	require.Contains(t, dl[0].Reason, "corrupt record: unreadable")
}

// TestCorruptDeadLetter: requeuing or purging a dead letter whose record
// is damaged neither fails halfway nor loses it: requeued, it is
// delivered again under its id; purged, nothing of it is left.
func TestCorruptDeadLetter(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	for _, op := range []string{"requeue", "purge"} {
		t.Run(op, func(t *testing.T) {
			q, err := Open(ctx, rdb, "corrupt-dead-"+op, nil)
			require.NoError(t, err)
			defer q.Close()
			id, err := q.Enqueue(ctx, []byte("x"))
			require.NoError(t, err)
			m, err := q.TryDequeue()
			require.NoError(t, err)
			require.NoError(t, m.DeadLetter("why"))
			require.NoError(t, rdb.HSet(ctx, q.keys[1], "1", "not a record").Err())

			if op == "requeue" {
				n, err := q.RequeueAllDead()
				require.NoError(t, err)
				require.Equal(t, 1, n)
				m, err := q.TryDequeue()
				require.NoError(t, err, "requeued: ready again")
				require.Equal(t, id, m.ID)
				require.NoError(t, m.Ack())
			} else {
				n, err := q.PurgeAllDead()
				require.NoError(t, err)
				require.Equal(t, 1, n)
			}
			s := q.Stats()
			require.Equal(t, [3]int64{0, 0, 0}, [3]int64{s.Ready, s.InFlight, s.Dead})
			requireNoMessageLeft(t, rdb, q)
		})
	}
}

// TestCorruptInLargeBatch: a batch larger than one HMGET's chunk (500)
// with corrupt messages in both chunks leases as many sound messages as
// asked, each once and with its own payload and token, and buries the
// corrupt ones.
func TestCorruptInLargeBatch(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	// Leases of an hour: a batch of 1,201 may take longer than the default
	// 30 s on a loaded machine.
	q, err := Open(ctx, rdb, "corrupt-large", &Options{AckTimeout: time.Hour})
	require.NoError(t, err)
	defer q.Close()
	enqueueNumbered(t, q, 1203)
	for _, seq := range []string{"2", "700"} {
		require.NoError(t, rdb.HSet(ctx, q.keys[1], seq, "not a record").Err())
	}
	ms, err := q.DequeueBatch(ctx, 1201)
	require.NoError(t, err)
	require.Len(t, ms, 1201)
	seen := map[uint64]bool{}
	for _, m := range ms {
		require.False(t, seen[m.Receipt.Seq])
		seen[m.Receipt.Seq] = true
		require.Equal(t, strconv.FormatUint(m.Receipt.Seq, 10), string(m.Payload))
		require.NoError(t, m.Ack())
	}
	s := q.Stats()
	require.Equal(t, [3]int64{0, 0, 2}, [3]int64{s.Ready, s.InFlight, s.Dead})
}

// TestCorruptDeadLetterListed: a dead letter whose record is damaged or
// gone hides no other dead letter: DeadLetters lists it too, with a
// reason saying its record is corrupt and, where its body still tells
// them, its id and payload, so that the operator can requeue or purge it.
func TestCorruptDeadLetterListed(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	for i, c := range corruptions[:3] { // the record's damages
		t.Run(c.name, func(t *testing.T) {
			q, err := Open(ctx, rdb, "corrupt-listed-"+strconv.Itoa(i), nil)
			require.NoError(t, err)
			defer q.Close()
			ids, err := q.EnqueueBatch(ctx, []queue.Item{{Payload: []byte("a")}, {Payload: []byte("b")}})
			require.NoError(t, err)
			ms, err := q.DequeueBatch(ctx, 2)
			require.NoError(t, err)
			for _, m := range ms {
				require.NoError(t, m.DeadLetter("why"))
			}
			require.NoError(t, c.damage(ctx, rdb, q, "2"))

			dl, err := q.DeadLetters(0, 10)
			require.NoError(t, err, "one damaged letter does not hide the others")
			require.Len(t, dl, 2)
			require.Equal(t, [2]string{ids[0], "a"}, [2]string{dl[0].ID, string(dl[0].Payload)})
			require.Equal(t, "why", dl[0].Reason)
			require.Equal(t, uint64(2), dl[1].Seq)
			require.Equal(t, [2]string{ids[1], "b"}, [2]string{dl[1].ID, string(dl[1].Payload)}, "told from the body")
			require.Contains(t, dl[1].Reason, c.reason)
			require.NoError(t, q.RequeueDead(ids[1]), "requeued by the id listed")
			m, err := q.TryDequeue()
			require.NoError(t, err)
			require.Equal(t, "b", string(m.Payload))
			require.NoError(t, m.Ack())
		})
	}
}

// TestCorruptIDUnknown: a message whose record and body are both gone
// cannot tell its id: its dead letter's reason says so, since a producer
// id it held stays refused after a purge (doc.go says what to do), and a
// settle by that id still reaches the letter through the id's index.
func TestCorruptIDUnknown(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	q, err := Open(ctx, rdb, "corrupt-id-unknown", nil)
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("x"), queue.WithID("job-1"))
	require.NoError(t, err)
	require.NoError(t, rdb.HDel(ctx, q.keys[1], "1", "b1").Err())
	_, err = q.TryDequeue()
	require.ErrorIs(t, err, queue.ErrEmpty)

	dl, err := q.DeadLetters(0, 10)
	require.NoError(t, err)
	require.Len(t, dl, 1)
	require.Equal(t, "", dl[0].ID)
	require.Equal(t, "corrupt record: missing; id unknown", dl[0].Reason)
	require.NoError(t, q.PurgeDead("job-1"), "the id's index still names the letter")
	_, err = q.Enqueue(ctx, []byte("y"), queue.WithID("job-1"))
	require.NoError(t, err, "purged by its id, the id is free again")
}

// TestCorruptRecordFence: a receipt whose leased record was damaged in a
// way that keeps the live token but not the id (its length runs past the
// record's end) settles nothing: the id it would read (a cut one) may be
// another live message's, whose index the ack would remove, freeing that
// message's producer id while it lives.
func TestCorruptRecordFence(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	q, err := Open(ctx, rdb, "corrupt-fence", nil)
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Enqueue(ctx, []byte("y"), queue.WithID("y-long-id"))
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("x"), queue.WithID("short"), queue.WithDelay(time.Hour))
	require.NoError(t, err)
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "y", string(m.Payload))
	rec := "1:1:" + strconv.FormatUint(m.Receipt.Lease, 10) + ":99:short"
	require.NoError(t, rdb.HSet(ctx, q.keys[1], "1", rec).Err())

	require.ErrorIs(t, m.Ack(), queue.ErrLeaseLost, "a record that does not parse is no live delivery")
	_, err = q.Enqueue(ctx, []byte("x2"), queue.WithID("short"))
	require.ErrorIs(t, err, queue.ErrDuplicate, "the other message's id is still taken")
}

// TestCorruptThenDuePromoted: a dequeue that buries the only ready message
// and so finds nothing ready promotes delayed messages that are due, as
// every dequeue that finds nothing ready does, even when '#w' (see
// scripts/common.lua) says none is (a handle of an earlier version adds
// delayed messages without lowering it).
func TestCorruptThenDuePromoted(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	takes := []struct {
		name string
		take func(q *Queue) (*queue.Message, error)
	}{
		{"lone", func(q *Queue) (*queue.Message, error) { return q.TryDequeue() }},
		{"gathered", func(q *Queue) (*queue.Message, error) { // the batch script, not waiting
			reqs := []*leaseReq{{p: newPresence(ctx)}, {p: newPresence(ctx)}}
			errs := q.leaseEach(reqs)
			if reqs[0].m == nil {
				return nil, errors.Join(errs[0], queue.ErrEmpty)
			}
			return reqs[0].m, errs[0]
		}},
	}
	for _, tk := range takes {
		t.Run(tk.name, func(t *testing.T) {
			clock := queuetest.NewClock()
			q, err := Open(ctx, rdb, "corrupt-then-due-"+tk.name, &Options{Clock: noTimers{clock}, ManualRequeue: true})
			require.NoError(t, err)
			defer q.Close()
			_, err = q.Enqueue(ctx, []byte("a"), queue.WithDelay(time.Second))
			require.NoError(t, err)
			_, err = q.Enqueue(ctx, []byte("b"))
			require.NoError(t, err)
			require.NoError(t, rdb.HSet(ctx, q.keys[1], "2", "not a record", "#w", "4611686018427387904").Err())
			clock.Advance(2 * time.Second)

			m, err := tk.take(q)
			require.NoError(t, err, "a is due")
			require.Equal(t, "a", string(m.Payload))
			require.NoError(t, m.Ack())
		})
	}
}

// noTimers is a clock whose timers never fire: no housekeeper wakes at a
// due time on its own, so what a test sees promoted a dequeue promoted.
type noTimers struct{ *queuetest.Clock }

func (noTimers) After(time.Duration) <-chan time.Time { return nil }

// requireNoMessageLeft: the queue's message hash holds only its own
// fields (counters and hints), nothing of any message.
func requireNoMessageLeft(t *testing.T, rdb *redis.Client, q *Queue) {
	t.Helper()
	left, err := rdb.HKeys(context.Background(), q.keys[1]).Result()
	require.NoError(t, err)
	for _, f := range left {
		require.Contains(t, []string{"", "#d", "#w", "#t", "#q"}, f, "nothing of the message is left")
	}
}

// TestCorruptNotDelivered: Stats.Delivered counts deliveries a consumer
// got (leases, as the embedded queue counts them), so a message buried
// because its record or its body cannot be read counts none, whichever
// side found it: the script (record) or the client (body, after the
// script leased it); nor does its dead letter count one.
func TestCorruptNotDelivered(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "lone", true: "batch"}[batch], func(t *testing.T) {
			q, err := Open(ctx, rdb, "undelivered-"+strconv.FormatBool(batch), &Options{ManualRequeue: true})
			require.NoError(t, err)
			defer q.Close()
			for _, p := range []string{"a", "b", "c", "d"} {
				_, err := q.Enqueue(ctx, []byte(p))
				require.NoError(t, err)
			}
			require.NoError(t, rdb.HSet(ctx, q.keys[1], "b2", "\xc1").Err())        // body: found by the client
			require.NoError(t, rdb.HSet(ctx, q.keys[1], "3", "not a record").Err()) // record: found by the script
			var got []string
			if batch {
				ms, err := q.DequeueBatch(ctx, 4)
				require.NoError(t, err)
				for _, m := range ms {
					got = append(got, string(m.Payload))
				}
			} else {
				for {
					m, err := q.TryDequeue()
					if errors.Is(err, queue.ErrEmpty) {
						break
					}
					require.NoError(t, err)
					got = append(got, string(m.Payload))
				}
			}
			require.Equal(t, []string{"a", "d"}, got)
			st := q.Stats()
			require.Equal(t, [2]int64{2, 2}, [2]int64{int64(st.Delivered), st.Dead}, "delivered, dead")
			dl, err := q.DeadLetters(0, 10)
			require.NoError(t, err)
			require.Len(t, dl, 2)
			for _, d := range dl {
				require.Zero(t, d.Deliveries, "letter %d was never delivered", d.Seq)
			}
		})
	}
}

// TestCorruptManyBuried: a dequeue buries at most 1000 damaged records
// per script call (one call must not hold the server for as long as the
// queue is damaged) and calls again: a TryDequeue behind 1100 of them
// still gets the sound message, and every damaged one is dead.
func TestCorruptManyBuried(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "lone", true: "batch"}[batch], func(t *testing.T) {
			q, err := Open(ctx, rdb, "many-buried-"+strconv.FormatBool(batch), &Options{ManualRequeue: true})
			require.NoError(t, err)
			defer q.Close()
			enqueueNumbered(t, q, 1101)
			var calls atomic.Int64
			rdb.AddHook(&fcallFaults{seen: func(fn string, args []any, _ error) {
				if strings.HasSuffix(fn, "_dequeue") {
					calls.Add(1)
				}
			}})
			garbleRecords(t, rdb, q, 1, 1100)
			var m *queue.Message
			if batch {
				// A bounded wait: a dequeue that wrongly found nothing
				// would block, and must fail the test instead.
				bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				ms, err := q.DequeueBatch(bctx, 2)
				cancel()
				require.NoError(t, err)
				require.Len(t, ms, 1)
				m = ms[0]
			} else {
				m, err = q.TryDequeue()
				require.NoError(t, err)
			}
			require.Equal(t, "1101", string(m.Payload))
			require.Equal(t, int64(2), calls.Load(), "two dequeue calls")
			require.NoError(t, m.Ack())
			require.Equal(t, int64(1100), q.Stats().Dead)
		})
	}
}

// TestCorruptManyBuriedGathered: lone Dequeues gathered into one call
// that leases some messages and then reaches its cap of burials are not
// told the queue is empty while sound messages are ready behind the
// damage: the handle calls again for those that got none.
func TestCorruptManyBuriedGathered(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	q, err := Open(ctx, rdb, "many-buried-gathered", &Options{ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	enqueueNumbered(t, q, 1102)
	garbleRecords(t, rdb, q, 2, 1101) // 1 and 1102 stay sound

	reqs := []*leaseReq{{p: newPresence(ctx)}, {p: newPresence(ctx)}} // two lone Dequeues, gathered
	for _, err := range q.leaseEach(reqs) {
		require.NoError(t, err)
	}
	for i, want := range []string{"1", "1102"} {
		require.NotNil(t, reqs[i].m, "request %d leased nothing", i)
		require.Equal(t, want, string(reqs[i].m.Payload))
		require.NoError(t, reqs[i].m.Ack())
	}
	require.Equal(t, int64(1100), q.Stats().Dead)
}

// enqueueNumbered enqueues n messages in one batch, whose payloads are
// their seqs in decimal: "1", "2", ...
func enqueueNumbered(t *testing.T, q *Queue, n int) {
	t.Helper()
	items := make([]queue.Item, n)
	for i := range items {
		items[i].Payload = []byte(strconv.Itoa(i + 1))
	}
	_, err := q.EnqueueBatch(context.Background(), items)
	require.NoError(t, err)
}

// garbleRecords overwrites the records of the messages from seq first
// through last with bytes that are no record.
func garbleRecords(t *testing.T, rdb redis.Cmdable, q *Queue, first, last int) {
	t.Helper()
	ctx := context.Background()
	pipe := rdb.Pipeline()
	for seq := first; seq <= last; seq++ {
		pipe.HSet(ctx, q.keys[1], strconv.Itoa(seq), "not a record")
	}
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
}

// TestCorruptGarbledDeliveryCount: the dead-lettering of a message whose
// body does not decode takes back the delivery its lease counted in the
// message hash's field "#d"; a "#d" garbled by hand (read as none by
// every dequeue) must not fail it after the message went to the
// dead-letter set, which failed the dequeue.
func TestCorruptGarbledDeliveryCount(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	q, err := Open(ctx, rdb, "garbled-d", &Options{ManualRequeue: true})
	require.NoError(t, err)
	defer q.Close()
	for _, p := range []string{"a", "b"} {
		_, err := q.Enqueue(ctx, []byte(p))
		require.NoError(t, err)
	}
	require.NoError(t, rdb.HSet(ctx, q.keys[1], "b1", "\xc1").Err()) // a's body: found by the client
	rdb.AddHook(&fcallFaults{fail: func(fn string, args []any) bool {
		if isCall(fn, args, "settle", "corrupt") {
			require.NoError(t, rdb.HSet(ctx, q.keys[1], "#d", "abc").Err())
		}
		return false
	}})
	m, err := q.TryDequeue()
	require.NoError(t, err)
	require.Equal(t, "b", string(m.Payload))
	st := q.Stats()
	require.Equal(t, int64(1), st.Dead)
}
