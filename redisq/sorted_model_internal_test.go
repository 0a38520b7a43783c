package redisq

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq/internal/redistest"
)

// sortedVal is what the sorted model knows of one pending or pulled value.
type sortedVal struct {
	sort       int64
	seq        int // publish order, breaks ties of sort
	payload    string
	deliveries int
	at         time.Time // publish time
}

// sortedDead is a dead value of the model.
type sortedDead struct {
	key    string
	v      sortedVal
	reason string // the reason, or its start when it goes on (a last nack's)
}

// sortedBatch is a pulled batch of the model.
type sortedBatch struct {
	key      string
	vals     []sortedVal
	deadline time.Time
	settled  bool // acked, given back or dead-lettered
}

// sortedModel runs random operations on a sorted queue and on a model of
// it, side by side.
type sortedModel struct {
	t       *testing.T
	s       *Sorted[int64]
	clock   *queuetest.Clock
	rnd     *rand.Rand
	single  bool
	maxd    int
	seq     int
	pending map[string][]sortedVal
	hold    map[string]time.Time
	batches map[uint64]*sortedBatch // by lease token, every batch ever pulled
	tokens  []uint64
	dead    map[int]sortedDead // by seq
}

// TestSortedModel: random publishes, pulls, settles of batch receipts ever
// issued (stale, expired, repeated), expiries and clock steps on a sorted
// queue, with and without single flight, checked against a model: a pull
// takes the pullable keys in the order of their smallest pending value,
// each whole and in sort order, as far as max allows; a key held by a
// nack delay, or under single flight with a batch out, is not pulled; a
// stale or expired receipt settles nothing; the counts agree. Dead values
// are listed (from a seq, up to a count), requeued and purged by seq,
// fenced by their publish time (a time off by 1 ns changes nothing) or
// not, one by one or all at once: a requeued value is pending under its
// key again, its deliveries reset, and pulled as single flight and nack
// holds allow. WALQ_MODEL_SEED replays a run.
func TestSortedModel(t *testing.T) {
	srv := redistest.Start(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("WALQ_MODEL_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (WALQ_MODEL_SEED)", seed)
	for run, single := range []bool{false, true} {
		clock := queuetest.NewClock()
		s, err := OpenSorted[int64](context.Background(), srv.Client(), fmt.Sprint("sorted-model-", run), &SortedOptions{
			SingleFlight: single, Options: Options{Clock: clock, AckTimeout: 10 * time.Second, ManualRequeue: true, MaxDeliveries: 3}})
		require.NoError(t, err)
		m := &sortedModel{t: t, s: s, clock: clock, rnd: rand.New(rand.NewPCG(seed, uint64(run))), single: single, maxd: 3,
			pending: map[string][]sortedVal{}, hold: map[string]time.Time{}, batches: map[uint64]*sortedBatch{},
			dead: map[int]sortedDead{}}
		for step := range 1200 {
			switch x := m.rnd.IntN(100); {
			case x < 32:
				m.publish()
			case x < 52:
				m.pull()
			case x < 74:
				m.settle()
			case x < 82:
				clock.Advance(time.Duration(m.rnd.IntN(6000)) * time.Millisecond)
			case x < 90:
				m.expire()
			default:
				m.deadOp()
			}
			if step%20 == 0 {
				m.checkCounts(fmt.Sprint("step ", step))
				m.checkDead(fmt.Sprint("step ", step), 0, 0)
			}
		}
		m.checkCounts("end")
		m.checkDead("end", 0, 0)
		require.NoError(t, s.Close())
	}
}

func (m *sortedModel) publish() {
	key := fmt.Sprint("k", m.rnd.IntN(5))
	v := sortedVal{sort: int64(m.rnd.IntN(20)) - 5, seq: m.seq, payload: fmt.Sprint("v", m.seq), at: m.clock.Now()}
	m.seq++
	require.NoError(m.t, m.s.Publish(context.Background(), v.sort, key, []byte(v.payload)))
	m.pending[key] = append(m.pending[key], v)
}

// inflight tells whether key has a batch not yet settled (expired or not).
func (m *sortedModel) inflight(key string) bool {
	for _, b := range m.batches {
		if b.key == key && !b.settled {
			return true
		}
	}
	return false
}

// pullable lists the keys a pull may take now, in pull order.
func (m *sortedModel) pullable() []string {
	var keys []string
	for k, vs := range m.pending {
		if len(vs) == 0 || m.hold[k].After(m.clock.Now()) || (m.single && m.inflight(k)) {
			continue
		}
		sort.Slice(vs, func(i, j int) bool {
			if vs[i].sort != vs[j].sort {
				return vs[i].sort < vs[j].sort
			}
			return vs[i].seq < vs[j].seq
		})
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := m.pending[keys[i]][0].sort, m.pending[keys[j]][0].sort
		if a != b {
			return a < b
		}
		return keys[i] < keys[j]
	})
	return keys
}

func (m *sortedModel) pull() {
	max := 1 + m.rnd.IntN(6)
	keys := m.pullable()
	var want []string
	for n, i := 0, 0; n < max && i < len(keys); i++ {
		want = append(want, keys[i])
		n += len(m.pending[keys[i]])
	}
	bs, err := m.s.TryPull(max)
	if errors.Is(err, queue.ErrEmpty) {
		require.Empty(m.t, want, "a pull found nothing while keys were pullable")
		return
	}
	require.NoError(m.t, err)
	var got []string
	for _, b := range bs {
		got = append(got, b.Key)
	}
	require.Equal(m.t, want, got, "the keys pulled, in order")
	for _, b := range bs {
		vs := m.pending[b.Key]
		require.Len(m.t, b.Values, len(vs), "key %s whole", b.Key)
		for i, v := range b.Values {
			vs[i].deliveries++
			require.Equal(m.t, vs[i].sort, v.Sort)
			require.Equal(m.t, vs[i].payload, string(v.Payload), "value %d of %s", i, b.Key)
			require.Equal(m.t, vs[i].deliveries, v.Deliveries)
		}
		require.Nil(m.t, m.batches[b.Receipt.Lease], "a lease token issued twice")
		m.batches[b.Receipt.Lease] = &sortedBatch{key: b.Key, vals: vs, deadline: m.clock.Now().Add(10 * time.Second)}
		m.tokens = append(m.tokens, b.Receipt.Lease)
		delete(m.pending, b.Key)
		delete(m.hold, b.Key) // a pull ends the key's hold
	}
}

// giveback is the model of a batch's lease ended without an ack. A delay
// holds the key only if a value went back; a key keeps the later of two
// holds, and a key left without pending values loses its hold.
func (m *sortedModel) giveback(b *sortedBatch, delay time.Duration) {
	b.settled = true
	back := false
	for _, v := range b.vals {
		if v.deliveries >= m.maxd {
			m.dead[v.seq] = sortedDead{key: b.key, v: v, reason: fmt.Sprint(m.maxd, " deliveries; last: ")}
		} else {
			m.pending[b.key] = append(m.pending[b.key], v)
			back = true
		}
	}
	if until := m.clock.Now().Add(delay); delay > 0 && back && until.After(m.hold[b.key]) {
		m.hold[b.key] = until
	}
	if len(m.pending[b.key]) == 0 {
		delete(m.hold, b.key)
	}
}

func (m *sortedModel) settle() {
	if len(m.tokens) == 0 {
		return
	}
	tok := m.tokens[m.rnd.IntN(len(m.tokens))]
	b := m.batches[tok]
	live := !b.settled && b.deadline.After(m.clock.Now())
	r := queue.BatchReceipt{Lease: tok}
	var err error
	switch m.rnd.IntN(4) {
	case 0:
		err = m.s.Ack(r)
		if live {
			b.settled = true
		}
	case 1:
		d := time.Duration(m.rnd.IntN(3)) * 2 * time.Second
		err = m.s.Nack(r, d)
		if live {
			m.giveback(b, d)
		}
	case 2:
		d := time.Duration(1+m.rnd.IntN(20)) * time.Second
		err = m.s.Extend(r, d)
		if live {
			b.deadline = m.clock.Now().Add(d)
		}
	default:
		err = m.s.DeadLetter(r, "why")
		if live {
			b.settled = true
			for _, v := range b.vals {
				m.dead[v.seq] = sortedDead{key: b.key, v: v, reason: "why"}
			}
		}
	}
	if live {
		require.NoError(m.t, err, "the live receipt of %s settles", b.key)
	} else {
		require.ErrorIs(m.t, err, queue.ErrLeaseLost, "a stale or expired receipt of %s settles nothing", b.key)
	}
}

func (m *sortedModel) expire() {
	want := 0
	for _, b := range m.batches {
		if !b.settled && !b.deadline.After(m.clock.Now()) {
			want++
			m.giveback(b, 0)
		}
	}
	n, err := m.s.RequeueExpired()
	require.NoError(m.t, err)
	require.Equal(m.t, want, n, "leases ended")
}

func (m *sortedModel) checkCounts(when string) {
	pending, batches := 0, 0
	for _, vs := range m.pending {
		pending += len(vs)
	}
	for _, b := range m.batches {
		if !b.settled {
			batches++
		}
	}
	st, err := m.s.StatsContext(context.Background())
	require.NoError(m.t, err)
	require.Equal(m.t, [3]int{pending, batches, len(m.dead)}, [3]int{st.SortedPending, st.SortedBatches, st.SortedDead}, "counts at %s", when)
	// Each leased batch keeps its record, the record's copy and its
	// lease (key and count), and nothing is left of a settled or expired
	// one.
	n, err := storedFields(context.Background(), m.s.rdb, m.s.keys[7])
	require.NoError(m.t, err)
	require.Equal(m.t, int64(3*batches), n, "batch fields at %s", when)
	m.checkAge(when, st)
}

// checkAge checks the age set against the model: it names exactly the
// pending and leased values, by publish time and seq, and Stats gives the
// oldest one's publish time.
func (m *sortedModel) checkAge(when string, st queue.Stats) {
	var live []sortedVal
	for _, vs := range m.pending {
		live = append(live, vs...)
	}
	for _, b := range m.batches {
		if !b.settled {
			live = append(live, b.vals...)
		}
	}
	want := make([]string, 0, len(live))
	var oldest time.Time
	for _, v := range live {
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], uint64(v.at.UnixNano())^1<<63)
		binary.BigEndian.PutUint64(b[8:], uint64(v.seq+1)) // the server counts from 1
		want = append(want, string(b[:]))
		if oldest.IsZero() || v.at.Before(oldest) {
			oldest = v.at
		}
	}
	sort.Strings(want)
	got, err := m.s.rdb.ZRange(context.Background(), m.s.keys[13], 0, -1).Result()
	require.NoError(m.t, err)
	if len(got) == 0 {
		got = nil
	}
	if len(want) == 0 {
		want = nil
	}
	require.Equal(m.t, want, got, "age set at %s", when)
	require.NoError(m.t, st.OldestErr)
	require.True(m.t, st.OldestEnqueuedAt.Equal(oldest), "OldestEnqueuedAt %v at %s, want %v", st.OldestEnqueuedAt, when, oldest)
}

// deadSeqs returns the seqs of the model's dead values, in order.
func (m *sortedModel) deadSeqs() []int {
	var seqs []int
	for seq := range m.dead {
		seqs = append(seqs, seq)
	}
	sort.Ints(seqs)
	return seqs
}

// checkDead compares DeadValues(from, max) with the model's dead values
// (a queue's seq is the model's plus one: its counter starts at 1).
func (m *sortedModel) checkDead(when string, from uint64, max int) {
	var want, got []string
	for _, seq := range m.deadSeqs() {
		if uint64(seq+1) >= from && (max <= 0 || len(want) < max) {
			d := m.dead[seq]
			want = append(want, fmt.Sprint(seq+1, d.key, d.v.sort, d.v.payload, d.v.deliveries, d.v.at.UnixNano()))
		}
	}
	ds, err := m.s.DeadValues(from, max)
	require.NoError(m.t, err)
	for _, d := range ds {
		got = append(got, fmt.Sprint(d.Seq, d.Key, d.Sort, string(d.Payload), d.Deliveries, d.PublishedAt.UnixNano()))
		require.True(m.t, strings.HasPrefix(d.Reason, m.dead[int(d.Seq)-1].reason), "reason %q of %d at %s", d.Reason, d.Seq, when)
	}
	require.Equal(m.t, want, got, "dead values from %d, up to %d, at %s", from, max, when)
}

// deadOp lists, requeues or purges dead values, and applies the same to
// the model.
func (m *sortedModel) deadOp() {
	switch m.rnd.IntN(6) {
	case 0:
		m.checkDead("a listing", uint64(m.rnd.IntN(m.seq+2)), m.rnd.IntN(4))
	case 1, 2, 3:
		m.changeOne()
	case 4:
		n, err := m.s.RequeueAllDead()
		require.NoError(m.t, err)
		require.Equal(m.t, len(m.dead), n, "requeued all")
		for _, seq := range m.deadSeqs() {
			m.revive(seq)
		}
	default:
		n, err := m.s.PurgeAllDead()
		require.NoError(m.t, err)
		require.Equal(m.t, len(m.dead), n, "purged all")
		clear(m.dead)
	}
}

// changeOne requeues or purges one seq, mostly a dead one, by seq alone
// or fenced by its publish time (sometimes 1 ns off).
func (m *sortedModel) changeOne() {
	seq := m.rnd.IntN(m.seq + 1) // any seq, or one not given yet
	if seqs := m.deadSeqs(); len(seqs) > 0 && m.rnd.IntN(4) > 0 {
		seq = seqs[m.rnd.IntN(len(seqs))]
	}
	d, dead := m.dead[seq]
	purge, fenced, off := m.rnd.IntN(2) == 0, m.rnd.IntN(2) == 0, m.rnd.IntN(4) == 0
	at := d.v.at
	if !dead {
		at = m.clock.Now()
	}
	if off {
		at = at.Add(time.Nanosecond)
	}
	dv := queue.DeadValue[int64]{Seq: uint64(seq + 1), PublishedAt: at}
	var err error
	switch {
	case purge && fenced:
		err = m.s.PurgeDeadValue(dv)
	case purge:
		err = m.s.PurgeDead(dv.Seq)
	case fenced:
		err = m.s.RequeueDeadValue(dv)
	default:
		err = m.s.RequeueDead(dv.Seq)
	}
	if !dead || (fenced && off) {
		require.ErrorIs(m.t, err, queue.ErrNotFound, "seq %d dead %v fenced %v off %v", seq+1, dead, fenced, off)
		return
	}
	require.NoError(m.t, err, "seq %d", seq+1)
	if purge {
		delete(m.dead, seq)
	} else {
		m.revive(seq)
	}
}

// revive is the model of a requeue of the dead value seq.
func (m *sortedModel) revive(seq int) {
	d := m.dead[seq]
	delete(m.dead, seq)
	d.v.deliveries = 0
	m.pending[d.key] = append(m.pending[d.key], d.v)
}
