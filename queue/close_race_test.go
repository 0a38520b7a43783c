package queue_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/walq/walq/internal/seed"
	"github.com/walq/walq/queue"
)

// stamped is a payload that says which token it carries and checks its own
// bytes: "tok=N;" then filler, then the CRC-32 of all before it.
func stamped(tok int, rng *rand.Rand) []byte {
	b := fmt.Appendf(nil, "tok=%d;", tok)
	for n := rng.IntN(900); n > 0; n-- {
		b = append(b, byte('a'+rng.IntN(26)))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// unstamp returns the token of a payload stamped made, or an error saying
// how it is not one.
func unstamp(p []byte) (int, error) {
	if len(p) < 4 {
		return 0, fmt.Errorf("payload of %d bytes", len(p))
	}
	body, sum := p[:len(p)-4], binary.LittleEndian.Uint32(p[len(p)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return 0, fmt.Errorf("payload of %d bytes fails its checksum: %.40q", len(p), p)
	}
	rest, ok := bytes.CutPrefix(body, []byte("tok="))
	end := bytes.IndexByte(rest, ';')
	if !ok || end < 0 {
		return 0, fmt.Errorf("payload without a token: %.40q", p)
	}
	return strconv.Atoi(string(rest[:end]))
}

// raceLedger is what the goroutines of a close race were told, by token.
type raceLedger struct {
	mu       sync.Mutex
	ids      map[int]string // token -> id the enqueue returned
	durable  map[int]bool   // enqueue reported durable
	acked    map[int]bool   // ack reported durable
	ackTried map[int]bool   // ack made, outcome unknown or failed
	dead     map[int]bool   // dead-letter reported durable, no RequeueAllDead since
	requeues int            // RequeueAllDead calls begun and ended: odd while one runs
	bad      []string       // what no call may answer
}

func newRaceLedger() *raceLedger {
	return &raceLedger{ids: map[int]string{}, durable: map[int]bool{}, acked: map[int]bool{},
		ackTried: map[int]bool{}, dead: map[int]bool{}}
}

func (l *raceLedger) note(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f()
}

// wrong records an answer that breaks a promise.
func (l *raceLedger) wrong(format string, args ...any) {
	l.note(func() { l.bad = append(l.bad, fmt.Sprintf(format, args...)) })
}

// expect records err as wrong unless it is nil or one of ok.
func (l *raceLedger) expect(call string, err error, ok ...error) {
	if err == nil {
		return
	}
	for _, o := range ok {
		if errors.Is(err, o) {
			return
		}
	}
	l.wrong("%s: %v", call, err)
}

// received checks a delivery's payload and id against the ledger.
func (l *raceLedger) received(m *queue.Message) (int, bool) {
	tok, err := unstamp(m.Payload)
	if err != nil {
		l.wrong("message %s (seq %d) delivered with a wrong payload: %v", m.ID, m.Receipt.Seq, err)
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if id, ok := l.ids[tok]; ok && id != m.ID {
		l.bad = append(l.bad, fmt.Sprintf("message %s delivered with the payload of token %d, enqueued as %s", m.ID, tok, id))
	}
	if l.acked[tok] {
		l.bad = append(l.bad, fmt.Sprintf("token %d delivered after its ack was reported durable", tok))
	}
	return tok, true
}

// TestCloseRacesEveryCall closes a queue while producers (Enqueue,
// EnqueueBatch, EnqueueAsync), consumers (Dequeue blocked and not,
// DequeueBatch, every settle, synchronous and not) and a housekeeper
// (Compact, Stats, Browse, DeadLetters, PurgeDead, RequeueAllDead, Flush)
// run on 4 KiB segments. Each
// call returns (nil, or ErrClosed once closed), each Pending completes,
// every payload delivered is the one enqueued, and after a reopen every
// enqueue reported durable and not acked is there (ready or dead), every
// dead-lettering reported durable and neither requeued nor purged since
// is dead, and no ack reported durable is undone.
func TestCloseRacesEveryCall(t *testing.T) {
	s := seed.Take(t, "./queue")
	rounds := 12
	if testing.Short() {
		rounds = 4
	}
	for i := range rounds {
		for _, sync := range []queue.SyncMode{queue.SyncAlways, queue.SyncInterval, queue.SyncNever} {
			closeRace(t, rand.New(rand.NewPCG(s, uint64(i*3+int(sync)))), sync)
		}
	}
}

func closeRace(t *testing.T, rng *rand.Rand, mode queue.SyncMode) {
	t.Helper()
	clk := newFakeClock()
	dir := t.TempDir()
	o := &queue.Options{Sync: mode, SegmentSize: 4096, SnapshotBytes: 16 << 10, AckTimeout: time.Hour,
		Clock: clk, MaxPending: 64, MaxDeliveries: -1}
	r := &closeRacer{q: open(t, dir, o), l: newRaceLedger()}
	for i := range 3 {
		r.wg.Add(2)
		go r.produce(rng.Uint64() + uint64(i))
		go r.consume(rng.Uint64() + uint64(i))
	}
	r.wg.Add(1)
	go r.keep()
	time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
	r.l.expect("Close", r.q.Close(), errors.New("none"))
	waitGroupWithin(t, &r.wg, 20*time.Second)
	for _, f := range r.pends {
		f()
	}
	if len(r.l.bad) > 0 {
		t.Fatalf("sync mode %v: %d wrong answers, the first ones: %q", mode, len(r.l.bad), r.l.bad[:min(len(r.l.bad), 5)])
	}
	checkAfterRace(t, dir, o, clk, r.l)
}

// closeRacer is one race of TestCloseRacesEveryCall: the queue its
// goroutines (produce, consume, keep) call until Close, and what the
// calls were told.
type closeRacer struct {
	q    *queue.Queue
	l    *raceLedger
	next sync2Counter   // tokens
	wg   sync.WaitGroup // the goroutines

	pendMu sync.Mutex
	pends  []func() // each checks one Pending's outcome once Close returned; guarded by pendMu
}

func (r *closeRacer) addPend(f func()) {
	r.pendMu.Lock()
	defer r.pendMu.Unlock()
	r.pends = append(r.pends, f)
}

// produce enqueues until a call fails.
func (r *closeRacer) produce(seed uint64) {
	defer r.wg.Done()
	rng := rand.New(rand.NewPCG(seed, 1))
	for r.enqueue(rng) {
	}
}

// enqueue makes one Enqueue, EnqueueBatch or EnqueueAsync call of fresh
// tokens and notes what it was told; it reports whether the call
// succeeded.
func (r *closeRacer) enqueue(rng *rand.Rand) bool {
	ctx, l := context.Background(), r.l
	switch rng.IntN(3) {
	case 0:
		tok := r.next.add()
		id, err := r.q.Enqueue(ctx, stamped(tok, rng))
		if err != nil {
			l.expect("Enqueue", err, queue.ErrClosed)
			return false
		}
		l.note(func() { l.ids[tok], l.durable[tok] = id, true })
	case 1:
		items := make([]queue.Item, 1+rng.IntN(4))
		toks := make([]int, len(items))
		for i := range items {
			toks[i] = r.next.add()
			items[i].Payload = stamped(toks[i], rng)
		}
		ids, err := r.q.EnqueueBatch(ctx, items)
		if err != nil {
			l.expect("EnqueueBatch", err, queue.ErrClosed)
			return false
		}
		l.note(func() {
			for i, tok := range toks {
				l.ids[tok], l.durable[tok] = ids[i], true
			}
		})
	case 2:
		tok := r.next.add()
		p, err := r.q.EnqueueAsync(ctx, stamped(tok, rng))
		if err != nil {
			l.expect("EnqueueAsync", err, queue.ErrClosed)
			return false
		}
		l.note(func() { l.ids[tok] = p.ID() })
		r.addPend(func() {
			if err := waitPending(p); err != nil {
				l.wrong("EnqueueAsync of token %d: %v", tok, err)
				return
			}
			l.note(func() { l.durable[tok] = true })
		})
	}
	return true
}

// consume takes deliveries and settles each until a call fails.
func (r *closeRacer) consume(seed uint64) {
	defer r.wg.Done()
	rng := rand.New(rand.NewPCG(seed, 2))
	for {
		ms, err := r.dequeue(rng)
		for _, m := range ms {
			if tok, ok := r.l.received(m); ok && !r.settle(rng, m, tok) {
				return
			}
		}
		if err != nil {
			r.l.expect("Dequeue", err, queue.ErrClosed)
			return
		}
	}
}

// dequeue makes one Dequeue, TryDequeue or DequeueBatch call; an empty
// queue is no error.
func (r *closeRacer) dequeue(rng *rand.Rand) ([]*queue.Message, error) {
	var m *queue.Message
	var err error
	switch rng.IntN(3) {
	case 0:
		m, err = r.q.Dequeue(context.Background())
	case 1:
		if m, err = r.q.TryDequeue(); errors.Is(err, queue.ErrEmpty) {
			err = nil
		}
	case 2:
		return r.q.DequeueBatch(context.Background(), 1+rng.IntN(5))
	}
	if m == nil {
		return nil, err
	}
	return []*queue.Message{m}, err
}

// settle acks (one of five ways), nacks or dead-letters m, whose token is
// tok, or leaves it leased, and notes what it was told; it reports
// whether the call succeeded.
func (r *closeRacer) settle(rng *rand.Rand, m *queue.Message, tok int) bool {
	l := r.l
	var err error
	switch rng.IntN(8) {
	case 0:
		err = r.ack(tok, m.Ack)
	case 1:
		err = r.ackAsync(tok, "AckAsync", m.AckAsync)
	case 2:
		err = r.ackAsync(tok, "SettleAsync", func() (*queue.Pending, error) {
			return r.q.SettleAsync(queue.Settlement{Receipt: m.Receipt, Op: queue.SettleAck})
		})
	case 3:
		err = m.Nack(0)
	case 4:
		if err = m.Extend(time.Hour); err == nil {
			err = r.ack(tok, func() error { return r.q.Settle(queue.Settlement{Receipt: m.Receipt, Op: queue.SettleAck}) })
		}
	case 5:
		var began int
		l.note(func() { began = l.requeues })
		if err = m.DeadLetter("race"); err == nil {
			l.note(func() {
				// Not if a RequeueAllDead ran beside the dead-lettering:
				// it may have listed the letter and requeued it.
				if began%2 == 0 && l.requeues == began {
					l.dead[tok] = true
				}
			})
		}
	case 6:
		err = r.ack(tok, func() error { return r.q.AckBatch(m.Receipt) })
	case 7: // left leased
	}
	if err != nil {
		l.expect("settle", err, queue.ErrClosed)
		return false
	}
	return true
}

// ack makes an ack of token tok by call and notes it tried, and, when the
// call returned nil, that the ack is durable.
func (r *closeRacer) ack(tok int, call func() error) error {
	l := r.l
	l.note(func() { l.ackTried[tok] = true })
	err := call()
	if err == nil {
		l.note(func() { l.acked[tok] = true })
	}
	return err
}

// ackAsync is ack by an asynchronous call, named name: the ack is noted
// durable once its Pending completed without error, after Close.
func (r *closeRacer) ackAsync(tok int, name string, call func() (*queue.Pending, error)) error {
	l := r.l
	l.note(func() { l.ackTried[tok] = true })
	p, err := call()
	if err != nil {
		return err
	}
	r.addPend(func() {
		if err := waitPending(p); err != nil {
			l.wrong("%s of token %d: %v", name, tok, err)
			return
		}
		l.note(func() { l.acked[tok] = true })
	})
	return nil
}

// keep makes the housekeeping calls in turn (Compact, Stats, DeadLetters
// with purges and requeues, Browse, Flush) until one fails.
func (r *closeRacer) keep() {
	defer r.wg.Done()
	for i := 0; ; i++ {
		var err error
		switch i % 5 {
		case 0:
			err = r.q.Compact()
		case 1:
			// No read Stats makes in the race fails: a record still being
			// written, a compaction's cut and a Close are no OldestErr.
			r.l.expect("Stats.OldestErr", r.q.Stats().OldestErr)
		case 2:
			err = r.dead(i)
		case 3:
			_, err = r.q.Browse(queue.StateReady, 0, 20)
		case 4:
			err = r.q.Flush(context.Background())
		}
		if err != nil {
			r.l.expect(fmt.Sprint("housekeeping call ", i%5), err, queue.ErrClosed)
			return
		}
	}
}

// dead lists the dead letters, purges those whose token is a multiple of
// 3, and, on every third of its calls (i%15 == 2), requeues them all.
func (r *closeRacer) dead(i int) error {
	l := r.l
	ds, err := r.q.DeadLetters(0, 0)
	for _, d := range ds {
		tok, perr := unstamp(d.Payload)
		if perr != nil {
			l.wrong("dead letter %s: %v", d.ID, perr)
			continue
		}
		if err == nil && tok%3 == 0 { // a purge is an ack
			l.note(func() { delete(l.dead, tok) })
			err = r.ack(tok, func() error { return r.q.PurgeDead(d.ID) })
		}
	}
	if err == nil && i%15 == 2 {
		l.note(func() { clear(l.dead); l.requeues++ }) // each may be delivered and acked now
		_, err = r.q.RequeueAllDead()
		l.note(func() { l.requeues++ })
	}
	return err
}

// checkAfterRace reopens the queue, lets every lease run out, drains it
// and holds what it finds to the ledger.
func checkAfterRace(t *testing.T, dir string, o *queue.Options, clk interface{ Advance(time.Duration) }, l *raceLedger) {
	t.Helper()
	q := open(t, dir, o)
	defer q.Close()
	clk.Advance(2 * time.Hour)
	if _, err := q.RequeueExpired(); err != nil {
		t.Fatal(err)
	}
	found := map[int]int{}
	for {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		if err != nil {
			t.Fatalf("drain: %v", err)
		}
		tok, ok := l.received(m)
		if ok {
			found[tok]++
		}
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := q.DeadLetters(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	dead := map[int]bool{}
	for _, d := range ds {
		tok, err := unstamp(d.Payload)
		if err != nil {
			t.Fatalf("dead letter %s: %v", d.ID, err)
		}
		found[tok]++
		dead[tok] = true
		if l.acked[tok] {
			t.Errorf("token %d dead after its ack was reported durable", tok)
		}
	}
	for tok := range l.durable {
		if !l.acked[tok] && !l.ackTried[tok] && found[tok] == 0 {
			t.Errorf("token %d (id %s) reported durable, never acked, not found after reopen", tok, l.ids[tok])
		}
	}
	for tok := range l.dead {
		if !l.ackTried[tok] && !dead[tok] { // a purge is an ack
			t.Errorf("token %d dead-lettered, not dead after reopen (found %d times)", tok, found[tok])
		}
	}
	for tok, n := range found {
		if n > 1 {
			t.Errorf("token %d found %d times after reopen", tok, n)
		}
		if _, ok := l.ids[tok]; !ok {
			t.Errorf("token %d found after reopen, never enqueued", tok)
		}
	}
	if len(l.bad) > 0 {
		t.Fatalf("after reopen: %q", l.bad[:min(len(l.bad), 5)])
	}
}

// waitPending waits for p, at most 20 seconds: a Pending that never
// completes is a hang.
func waitPending(p *queue.Pending) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return p.Wait(ctx)
}

// waitGroupWithin fails the test if wg does not finish within d.
func waitGroupWithin(t *testing.T, wg *sync.WaitGroup, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("calls still running %v after Close", d)
	}
}

// sync2Counter hands out tokens.
type sync2Counter struct {
	mu sync.Mutex
	n  int
}

func (c *sync2Counter) add() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.n
}
