package redisq

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/queue/queuetest"
	"github.com/walq/walq/redisq/internal/redistest"
)

// modelMsg is what the model knows of one message.
type modelMsg struct {
	payload    string
	state      string    // ready, delayed, leased, dead, acked
	due        time.Time // delayed: when it is due
	lease      uint64    // leased: the live delivery's token
	deadline   time.Time // leased: its lease deadline
	deliveries int       // deliveries so far
	ackedAt    time.Time // acked or purged: when
}

// queueModel runs random operations on a queue and on a model of it,
// side by side, and checks every answer of the queue against the model.
type queueModel struct {
	t     *testing.T
	q     *Queue
	clock *queuetest.Clock
	rnd   *rand.Rand
	msgs  map[string]*modelMsg // by id
	bySeq map[uint64]string    // id by seq
	all   []queue.Receipt      // every receipt issued
	maxd  int
	prev  bool // the previous version's library is loaded: some calls go through it
}

// TestModel: random enqueues (some delayed), lone, batch and gathered
// dequeues, acks (lone and gathered, with stale and repeated receipts),
// nacks (some delayed), extends, dead letters, expiries, requeues and
// purges of dead letters, and clock steps, checked one by one against a
// model: a message is delivered only when ready or due, with its own
// payload and delivery count, to one live receipt at a time; a stale or
// expired receipt settles nothing; a dequeue finds a message whenever one
// is ready; and the counts agree. WALQ_MODEL_SEED replays a run.
func TestModel(t *testing.T) {
	srv := redistest.Start(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("WALQ_MODEL_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (WALQ_MODEL_SEED)", seed)
	require.NoError(t, srv.Client().FunctionLoad(context.Background(), previousLibrary).Err())
	for run := range 3 {
		clock := queuetest.NewClock()
		q, err := Open(context.Background(), srv.Client(), fmt.Sprint("model-", run),
			&Options{Clock: clock, AckTimeout: 10 * time.Second, ManualRequeue: true, MaxDeliveries: 3,
				DedupWindow: modelWindow})
		require.NoError(t, err)
		m := &queueModel{t: t, q: q, clock: clock, rnd: rand.New(rand.NewPCG(seed, uint64(run))),
			msgs: map[string]*modelMsg{}, bySeq: map[uint64]string{}, maxd: 3, prev: run == 2}
		for step := range 1500 {
			m.step(step)
		}
		m.checkCounts("end")
		require.NoError(t, q.Close())
	}
}

// modelWindow is the model queue's DedupWindow.
const modelWindow = 30 * time.Second

func (m *queueModel) step(step int) {
	switch x := m.rnd.IntN(100); {
	case x < 20:
		m.enqueue(step)
	case x < 45:
		m.dequeue()
	case x < 65:
		m.settle()
	case x < 75:
		m.clock.Advance(time.Duration(m.rnd.IntN(6000)) * time.Millisecond)
	case x < 82:
		m.expire()
	case x < 85:
		m.deadOp()
	default:
		m.ackGathered()
	}
	if step%100 == 0 {
		m.checkCounts(fmt.Sprint("step ", step))
	}
}

func (m *queueModel) enqueue(step int) {
	p := fmt.Sprint("p", step)
	var opts []queue.EnqueueOption
	mm := &modelMsg{payload: p, state: "ready"}
	if m.rnd.IntN(4) == 0 {
		d := time.Duration(1+m.rnd.IntN(8000)) * time.Millisecond
		opts = append(opts, queue.WithDelay(d))
		mm.state, mm.due = "delayed", m.clock.Now().Add(d)
	}
	if m.rnd.IntN(5) == 0 {
		pid := fmt.Sprint("u", m.rnd.IntN(8))
		opts = append(opts, queue.WithID(pid))
		if old := m.msgs[pid]; old != nil && (old.state != "acked" || old.ackedAt.After(m.clock.Now().Add(-modelWindow))) {
			_, err := m.q.Enqueue(context.Background(), []byte(p), opts...)
			require.ErrorIs(m.t, err, queue.ErrDuplicate, "%s is %s", pid, old.state)
			return
		}
	}
	id, err := m.q.Enqueue(context.Background(), []byte(p), opts...)
	require.NoError(m.t, err)
	m.msgs[id] = mm
}

// available counts the messages a dequeue may lease now.
func (m *queueModel) available() int {
	n := 0
	for _, mm := range m.msgs {
		if mm.state == "ready" || (mm.state == "delayed" && !mm.due.After(m.clock.Now())) {
			n++
		}
	}
	return n
}

func (m *queueModel) dequeue() {
	avail := m.available()
	var got []*queue.Message
	want := 1
	switch m.rnd.IntN(4) {
	case 3:
		if !m.prev {
			return
		}
		want = 1 + m.rnd.IntN(3)
		got = m.leasePrevious(want)
	case 0:
		msg, err := m.q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			require.Zero(m.t, avail, "a dequeue found nothing while messages were ready")
			return
		}
		require.NoError(m.t, err)
		got = append(got, msg)
	case 1:
		want = 1 + m.rnd.IntN(5)
		ms, _, err := m.q.lease(context.Background(), want, false)
		require.NoError(m.t, err)
		got = ms
	default:
		want = 1 + m.rnd.IntN(4)
		reqs := make([]*leaseReq, want)
		for i := range reqs {
			reqs[i] = &leaseReq{p: newPresence(context.Background())}
		}
		for _, err := range m.q.leaseEach(reqs) {
			require.NoError(m.t, err)
		}
		for _, r := range reqs {
			if r.m != nil {
				got = append(got, r.m)
			}
		}
	}
	require.Equal(m.t, min(want, avail), len(got), "leased as many as were ready")
	for _, msg := range got {
		mm := m.msgs[msg.ID]
		require.NotNil(m.t, mm, "an id that was never enqueued")
		require.Equal(m.t, mm.payload, string(msg.Payload), "its own payload")
		require.Contains(m.t, []string{"ready", "delayed"}, mm.state, "delivered while %s", mm.state)
		if mm.state == "delayed" {
			require.False(m.t, mm.due.After(m.clock.Now()), "delivered before its due time")
		}
		mm.deliveries++
		require.Equal(m.t, mm.deliveries, msg.Deliveries)
		mm.state, mm.lease, mm.deadline = "leased", msg.Receipt.Lease, m.clock.Now().Add(m.q.o.AckTimeout)
		m.all = append(m.all, msg.Receipt)
		m.bySeq[msg.Receipt.Seq] = msg.ID
	}
}

// leasePrevious leases up to max messages through the previous version's
// dequeue, with the arguments its client sends.
func (m *queueModel) leasePrevious(max int) []*queue.Message {
	args := []any{micros(m.q.o.AckTimeout), max}
	for range max {
		args = append(args, strconv.FormatUint(newToken(), 10))
	}
	reply := earlier(m.t, m.q, previousName, "dequeue", m.clock.Now(), args...)
	var out []*queue.Message
	for i := 1; i+2 < len(reply); i += 3 {
		tok, _ := strconv.ParseUint(args[2+len(out)].(string), 10, 64)
		msg, err := decodeMessage(reply[i+2], queue.Receipt{Seq: uint64(toInt(reply[i])), Lease: tok})
		require.NoError(m.t, err)
		msg.Deliveries = int(toInt(reply[i+1]))
		out = append(out, queue.NewMessage(m.q, *msg))
	}
	return out
}

// settlePrevious settles r through the previous version's settle.
func (m *queueModel) settlePrevious(op, arg string, r queue.Receipt) error {
	reply := earlier(m.t, m.q, previousName, "settle", m.clock.Now(), op, arg, "r",
		strconv.FormatUint(r.Seq, 10), strconv.FormatUint(r.Lease, 10))
	if toInt(reply[0]) != 0 {
		return queue.ErrLeaseLost
	}
	return nil
}

// receipt picks a receipt ever issued, stale ones included.
func (m *queueModel) receipt() (queue.Receipt, bool) {
	if len(m.all) == 0 {
		return queue.Receipt{}, false
	}
	return m.all[m.rnd.IntN(len(m.all))], true
}

// live tells whether r is the live delivery of its message, unexpired.
func (m *queueModel) live(r queue.Receipt) (*modelMsg, bool) {
	mm := m.msgs[m.bySeq[r.Seq]]
	return mm, mm.state == "leased" && mm.lease == r.Lease && mm.deadline.After(m.clock.Now())
}

func (m *queueModel) settle() {
	r, ok := m.receipt()
	if !ok {
		return
	}
	mm, live := m.live(r)
	var err error
	switch m.rnd.IntN(5) {
	case 4:
		if !m.prev {
			return
		}
		op := []string{"ack", "nack", "dead"}[m.rnd.IntN(3)]
		arg := map[string]string{"ack": "", "nack": micros(2 * time.Second), "dead": "why"}[op]
		err = m.settlePrevious(op, arg, r)
		if live {
			switch op {
			case "ack":
				mm.state, mm.ackedAt = "acked", m.clock.Now()
			case "nack":
				m.giveback(mm, 2*time.Second)
			default:
				mm.state = "dead"
			}
		}
	case 0:
		err = m.q.Ack(r)
		if live {
			mm.state, mm.ackedAt = "acked", m.clock.Now()
		}
	case 1:
		d := time.Duration(m.rnd.IntN(3)) * 2 * time.Second
		err = m.q.Nack(r, d)
		if live {
			m.giveback(mm, d)
		}
	case 2:
		d := time.Duration(1+m.rnd.IntN(20)) * time.Second
		err = m.q.Extend(r, d)
		if live {
			mm.deadline = m.clock.Now().Add(d)
		}
	default:
		err = m.q.DeadLetter(r, "why")
		if live {
			mm.state = "dead"
		}
	}
	if live {
		require.NoError(m.t, err, "the live receipt %s settles", r)
	} else {
		require.ErrorIs(m.t, err, queue.ErrLeaseLost, "a stale or expired receipt %s settles nothing", r)
	}
}

// giveback is the model of a lease ended without an ack.
func (m *queueModel) giveback(mm *modelMsg, delay time.Duration) {
	switch {
	case mm.deliveries >= m.maxd:
		mm.state = "dead"
	case delay > 0:
		mm.state, mm.due = "delayed", m.clock.Now().Add(delay)
	default:
		mm.state = "ready"
	}
}

func (m *queueModel) ackGathered() {
	var rs []queue.Receipt
	for range 1 + m.rnd.IntN(5) {
		if r, ok := m.receipt(); ok {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return
	}
	errs := m.q.settle("ack", "", rs)
	for i, r := range rs {
		mm, live := m.live(r)
		if live {
			require.NoError(m.t, errs[i], "the live receipt %s acks", r)
			mm.state, mm.ackedAt = "acked", m.clock.Now()
		} else {
			require.ErrorIs(m.t, errs[i], queue.ErrLeaseLost, "a stale, expired or settled receipt %s acks nothing", r)
		}
	}
}

func (m *queueModel) expire() {
	want := 0
	for _, mm := range m.msgs {
		if mm.state == "leased" && !mm.deadline.After(m.clock.Now()) {
			want++
			m.giveback(mm, 0)
		}
	}
	n, err := m.q.RequeueExpired()
	require.NoError(m.t, err)
	require.Equal(m.t, want, n, "leases ended")
}

func (m *queueModel) deadOp() {
	var n int
	var err error
	want := 0
	requeue := m.rnd.IntN(2) == 0
	for _, mm := range m.msgs {
		if mm.state == "dead" {
			want++
			if requeue {
				mm.state, mm.deliveries = "ready", 0
			} else {
				mm.state, mm.ackedAt = "acked", m.clock.Now()
			}
		}
	}
	if requeue {
		n, err = m.q.RequeueAllDead()
	} else {
		n, err = m.q.PurgeAllDead()
	}
	require.NoError(m.t, err)
	require.Equal(m.t, want, n)
}

func (m *queueModel) checkCounts(when string) {
	var waiting, leased, dead int64
	for _, mm := range m.msgs {
		switch mm.state {
		case "ready", "delayed":
			waiting++
		case "leased":
			leased++
		case "dead":
			dead++
		}
	}
	s, err := m.q.StatsContext(context.Background())
	require.NoError(m.t, err)
	require.Equal(m.t, [3]int64{waiting, leased, dead}, [3]int64{s.Ready + s.Delayed, s.InFlight, s.Dead}, "counts at %s", when)
}
