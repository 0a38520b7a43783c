package redisq

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
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
	dead    int
}

// TestSortedModel: random publishes, pulls, settles of batch receipts ever
// issued (stale, expired, repeated), expiries and clock steps on a sorted
// queue, with and without single flight, checked against a model: a pull
// takes the pullable keys in the order of their smallest pending value,
// each whole and in sort order, as far as max allows; a key held by a
// nack delay, or under single flight with a batch out, is not pulled; a
// stale or expired receipt settles nothing; the counts agree.
// WALQ_MODEL_SEED replays a run.
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
			pending: map[string][]sortedVal{}, hold: map[string]time.Time{}, batches: map[uint64]*sortedBatch{}}
		for step := range 1200 {
			switch x := m.rnd.IntN(100); {
			case x < 35:
				m.publish()
			case x < 55:
				m.pull()
			case x < 80:
				m.settle()
			case x < 90:
				clock.Advance(time.Duration(m.rnd.IntN(6000)) * time.Millisecond)
			default:
				m.expire()
			}
			if step%100 == 0 {
				m.checkCounts(fmt.Sprint("step ", step))
			}
		}
		m.checkCounts("end")
		require.NoError(t, s.Close())
	}
}

func (m *sortedModel) publish() {
	key := fmt.Sprint("k", m.rnd.IntN(5))
	v := sortedVal{sort: int64(m.rnd.IntN(20)) - 5, seq: m.seq, payload: fmt.Sprint("v", m.seq)}
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
	}
}

// giveback is the model of a batch's lease ended without an ack.
func (m *sortedModel) giveback(b *sortedBatch, delay time.Duration) {
	b.settled = true
	for _, v := range b.vals {
		if v.deliveries >= m.maxd {
			m.dead++
		} else {
			m.pending[b.key] = append(m.pending[b.key], v)
		}
	}
	if delay > 0 {
		m.hold[b.key] = m.clock.Now().Add(delay)
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
			m.dead += len(b.vals)
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
	require.Equal(m.t, [3]int{pending, batches, m.dead}, [3]int{st.SortedPending, st.SortedBatches, st.SortedDead}, "counts at %s", when)
	// Each leased batch keeps its record and the record's copy, and
	// nothing else is left of a settled or expired one.
	n, err := m.s.rdb.HLen(context.Background(), m.s.keys[7]).Result()
	require.NoError(m.t, err)
	require.Equal(m.t, int64(2*batches), n, "batch records at %s", when)
}
