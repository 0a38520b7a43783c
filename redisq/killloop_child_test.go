package redisq_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
)

// The kill loop's children (TestKillLoop) run producers and consumers on
// one queue until the parent kills them (SIGKILL), writing what each call
// returned to a journal, one line per write(2), before the result is used:
// a kill cuts the journal at a line, and what it holds is what the
// callers were told. The lines, fields separated by spaces, times in Unix
// nanoseconds:
//
//	E? tok               an enqueue of tok is about to be sent
//	E+ tok id            it returned nil, with id
//	ED tok id            it returned ErrDuplicate
//	E! tok               it returned another error (it may have run)
//	D tok id seq n t0 t1 a delivery of tok (its n-th), the dequeue called at t0, returned at t1
//	X text               a delivery whose payload or id is not what was enqueued
//	A? tok seq n t       an ack of that delivery is about to be sent at t
//	A+ tok seq n t1      it returned nil at t1
//	AL tok seq n t1      it returned ErrLeaseLost at t1
//	A! tok seq n         it returned another error (it may have run)
//	S? tok seq n t how   a nack (how "nack") or dead-letter ("dead") of that delivery is about to be sent at t
//	L? tok seq n t d     an Extend of that delivery's lease by d (ns) is about to be sent at t
//	L+ tok seq n t       it returned nil at t
//	LL tok seq n t       it returned ErrLeaseLost at t
//	L! tok seq n         it returned another error (it may have run)
//
// A token names one enqueue attempt: "c<cycle>.k<child>.n<number>" is the
// message's id (for producer-given ids) and ".a<attempt>" the attempt
// (an enqueue sent again after an unknown outcome is a new attempt of the
// same id, with a payload of its own).

// killLoopEnv is the environment variable that makes the test binary a
// kill-loop child; its value is the child's settings (killChildConfig).
const killLoopEnv = "WALQ_REDISQ_KILLLOOP_CHILD"

// init runs the test binary as a kill-loop child, before TestMain, when
// the parent re-executed it so.
func init() {
	if cfg := os.Getenv(killLoopEnv); cfg != "" {
		os.Exit(runKillChild(cfg))
	}
}

// killChildConfig is what a child does, chosen by the parent per cycle.
type killChildConfig struct {
	Addr, Queue, Journal  string
	Cycle, Child          int
	Seed                  uint64
	AckTimeout, Dedup     time.Duration
	MaxDeliveries         int
	Producers, Consumers  int
	DelayPct, NackPct     int // percent of enqueues delayed, of deliveries nacked
	AbandonPct, ShortPct  int // percent of deliveries left to run out; of calls under a short context
	BatchPct, GeneratePct int // percent of enqueues in batches; with generated ids
	Sorted                int // publishers and pullers each on the sorted queue (killSortedQueue)
}

func (c killChildConfig) encode() string {
	return fmt.Sprintf("%s|%s|%s|%d|%d|%d|%d|%d|%d|%d|%d|%d|%d|%d|%d|%d|%d|%d",
		c.Addr, c.Queue, c.Journal, c.Cycle, c.Child, c.Seed, c.AckTimeout, c.Dedup, c.MaxDeliveries,
		c.Producers, c.Consumers, c.DelayPct, c.NackPct, c.AbandonPct, c.ShortPct, c.BatchPct, c.GeneratePct, c.Sorted)
}

func decodeKillChildConfig(s string) (killChildConfig, error) {
	f := strings.Split(s, "|")
	if len(f) != 18 {
		return killChildConfig{}, fmt.Errorf("kill-loop child config %q: %d fields", s, len(f))
	}
	n := make([]int64, 15)
	for i := range n {
		v, err := strconv.ParseInt(f[3+i], 10, 64)
		if err != nil {
			return killChildConfig{}, fmt.Errorf("kill-loop child config field %d: %w", 3+i, err)
		}
		n[i] = v
	}
	return killChildConfig{Addr: f[0], Queue: f[1], Journal: f[2], Cycle: int(n[0]), Child: int(n[1]),
		Seed: uint64(n[2]), AckTimeout: time.Duration(n[3]), Dedup: time.Duration(n[4]), MaxDeliveries: int(n[5]),
		Producers: int(n[6]), Consumers: int(n[7]), DelayPct: int(n[8]), NackPct: int(n[9]),
		AbandonPct: int(n[10]), ShortPct: int(n[11]), BatchPct: int(n[12]), GeneratePct: int(n[13]), Sorted: int(n[14])}, nil
}

// killPayload is the payload of token tok: the token, a NUL, and bytes
// drawn from the token's hash (0 to 299 of them, any byte value), so that
// a delivery shows which enqueue it is and whether its bytes are intact.
func killPayload(tok string) []byte {
	h := fnv.New64a()
	h.Write([]byte(tok))
	r := rand.New(rand.NewPCG(h.Sum64(), 7))
	p := append([]byte(tok), 0)
	for range r.IntN(300) {
		p = append(p, byte(r.UintN(256)))
	}
	return p
}

// killToken returns the token a payload names, and whether the payload is
// exactly the one enqueued for it.
func killToken(p []byte) (string, bool) {
	i := bytes.IndexByte(p, 0)
	if i < 0 {
		return "", false
	}
	tok := string(p[:i])
	return tok, bytes.Equal(p, killPayload(tok))
}

// killTokenID is the producer-given id of a token: the token less its
// attempt.
func killTokenID(tok string) string {
	if i := strings.LastIndex(tok, ".a"); i >= 0 {
		return tok[:i]
	}
	return tok
}

// journal is a child's record of what its calls returned: each line one
// write(2) to a file opened for appending, which a kill of the process
// does not tear.
type journal struct {
	mu sync.Mutex // orders the writes of the goroutines
	f  *os.File
}

func (j *journal) log(format string, args ...any) {
	line := fmt.Sprintf(format, args...) + "\n"
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.f.WriteString(line); err != nil {
		fmt.Fprintln(os.Stderr, "kill-loop journal:", err)
		os.Exit(5)
	}
}

// startKillChild is how every kill-loop child starts: it opens its
// journal (path) for appending, leaves as soon as the parent is gone (its
// stdin closed) and returns a client of the server at addr that never
// retries a command by itself (a child journals each call once).
func startKillChild(path, addr string) (*journal, *redis.Client, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("kill-loop child journal: %w", err)
	}
	go func() { // the parent gone (stdin closed): leave
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		os.Exit(0)
	}()
	return &journal{f: f}, redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1}), nil
}

func runKillChild(s string) int {
	c, err := decodeKillChildConfig(s)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	j, rdb, err := startKillChild(c.Journal, c.Addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	k := &killChild{c: c, j: j}
	k.q = openUntil(func() (*redisq.Queue, error) {
		return redisq.Open(context.Background(), rdb, c.Queue, &redisq.Options{
			AckTimeout: c.AckTimeout, MaxDeliveries: c.MaxDeliveries, DedupWindow: c.Dedup, OpTimeout: time.Second})
	})
	if c.Sorted > 0 {
		k.s = openUntil(func() (*redisq.Sorted[int64], error) { return openKillSorted(rdb, c) })
	}
	var wg sync.WaitGroup
	for n := range c.Sorted {
		wg.Go(func() { k.publish(rand.New(rand.NewPCG(c.Seed, uint64(200+n)))) })
		wg.Go(func() { k.pull(rand.New(rand.NewPCG(c.Seed, uint64(300+n)))) })
	}
	for p := range c.Producers {
		wg.Go(func() { k.produce(rand.New(rand.NewPCG(c.Seed, uint64(p)))) })
	}
	for n := range c.Consumers {
		wg.Go(func() { k.consume(rand.New(rand.NewPCG(c.Seed, uint64(100+n)))) })
	}
	wg.Wait() // never: the parent kills the process
	return 0
}

// openUntil opens a handle, again and again while the server is down or
// loading its files (the parent kills it as it likes, Opens included).
func openUntil[T any](open func() (T, error)) T {
	for {
		h, err := open()
		if err == nil {
			return h
		}
		fmt.Fprintln(os.Stderr, "kill-loop child open (tried again):", err)
		time.Sleep(20 * time.Millisecond)
	}
}

// killChild is one child process's traffic.
type killChild struct {
	c    killChildConfig
	q    *redisq.Queue
	s    *redisq.Sorted[int64] // nil when the child runs no sorted traffic
	j    *journal
	mu   sync.Mutex // guards next
	next int        // the next message number of this child
}

func (k *killChild) newID() string {
	return fmt.Sprintf("c%d.k%d.n%d", k.c.Cycle, k.c.Child, k.newNumber())
}

// callContext is a call's context: now and then one that ends within a
// few milliseconds, so that calls leave while in flight.
func (k *killChild) callContext(r *rand.Rand) (context.Context, context.CancelFunc) {
	if r.IntN(100) < k.c.ShortPct {
		return context.WithTimeout(context.Background(), time.Duration(1+r.IntN(20))*time.Millisecond)
	}
	return context.WithTimeout(context.Background(), 5*time.Second)
}

func (k *killChild) produce(r *rand.Rand) {
	for {
		if r.IntN(100) < k.c.BatchPct {
			k.enqueueBatch(r)
			continue
		}
		generated := r.IntN(100) < k.c.GeneratePct
		id := k.newID()
		for attempt := 0; attempt < 4; attempt++ {
			if !k.enqueueOne(r, id, attempt, generated) || generated {
				break
			}
		}
	}
}

// enqueueOne sends attempt of id once and reports whether its outcome is
// unknown (to be sent again under the same id).
func (k *killChild) enqueueOne(r *rand.Rand, id string, attempt int, generated bool) bool {
	tok := fmt.Sprintf("%s.a%d", id, attempt)
	var opts []queue.EnqueueOption
	if !generated {
		opts = append(opts, queue.WithID(id))
	}
	if r.IntN(100) < k.c.DelayPct {
		opts = append(opts, queue.WithDelay(time.Duration(1+r.IntN(300))*time.Millisecond))
	}
	ctx, cancel := k.callContext(r)
	defer cancel()
	k.j.log("E? %s", tok)
	got, err := k.q.Enqueue(ctx, killPayload(tok), opts...)
	switch {
	case err == nil:
		k.j.log("E+ %s %s", tok, got)
		return false
	case errors.Is(err, queue.ErrDuplicate):
		k.j.log("ED %s %s", tok, id)
		return false
	default:
		k.j.log("E! %s", tok)
		pause(err)
		return true
	}
}

// enqueueBatch enqueues a few messages with producer-given ids together,
// sending them again (new attempts) while the outcome is unknown.
func (k *killChild) enqueueBatch(r *rand.Rand) {
	ids := make([]string, 1+r.IntN(5))
	for i := range ids {
		ids[i] = k.newID()
	}
	for attempt := 0; attempt < 4; attempt++ {
		items := make([]queue.Item, len(ids))
		toks := make([]string, len(ids))
		for i, id := range ids {
			toks[i] = fmt.Sprintf("%s.a%d", id, attempt)
			items[i] = queue.Item{ID: id, Payload: killPayload(toks[i])}
			if r.IntN(100) < k.c.DelayPct {
				items[i].Delay = time.Duration(1+r.IntN(300)) * time.Millisecond
			}
			k.j.log("E? %s", toks[i])
		}
		ctx, cancel := k.callContext(r)
		got, err := k.q.EnqueueBatch(ctx, items)
		cancel()
		if err == nil {
			for i, tok := range toks {
				k.j.log("E+ %s %s", tok, got[i])
			}
			return
		}
		for _, tok := range toks {
			k.j.log("E! %s", tok) // a duplicate refuses the whole batch: which id is not told here
		}
		if errors.Is(err, queue.ErrDuplicate) {
			return
		}
		pause(err)
	}
}

// pause waits a little after an error other than a refusal, so that a
// child does not spin while the server is down.
func pause(err error) {
	if err != nil && !errors.Is(err, queue.ErrDuplicate) && !errors.Is(err, queue.ErrLeaseLost) {
		time.Sleep(5 * time.Millisecond)
	}
}

func (k *killChild) consume(r *rand.Rand) {
	for {
		ctx, cancel := k.callContext(r)
		t0 := time.Now().UnixNano()
		var ms []*queue.Message
		var err error
		if r.IntN(2) == 0 {
			var m *queue.Message
			if m, err = k.q.Dequeue(ctx); err == nil {
				ms = []*queue.Message{m}
			}
		} else {
			ms, err = k.q.DequeueBatch(ctx, 1+r.IntN(8))
		}
		cancel()
		t1 := time.Now().UnixNano()
		if err != nil {
			pause(err)
			continue
		}
		for _, m := range ms {
			k.settle(r, m, k.delivered(m, t0, t1))
		}
	}
}

// delivered journals a delivery, checking its payload and id against the
// token the payload names, and returns the token.
func (k *killChild) delivered(m *queue.Message, t0, t1 int64) string {
	tok, intact := killToken(m.Payload)
	if !intact {
		k.j.log("X payload of id %s seq %d is not the one enqueued: %q", m.ID, m.Receipt.Seq, m.Payload)
		return ""
	}
	if strings.Contains(m.ID, ".n") && m.ID != killTokenID(tok) {
		k.j.log("X id %s delivered with the payload of %s", m.ID, tok)
	}
	k.j.log("D %s %s %d %d %d %d", tok, m.ID, m.Receipt.Seq, m.Deliveries, t0, t1)
	return tok
}

// settle acks, nacks, dead-letters or abandons a delivery.
func (k *killChild) settle(r *rand.Rand, m *queue.Message, tok string) {
	if tok == "" {
		return
	}
	n := r.IntN(100)
	switch {
	case n < k.c.AbandonPct:
		return // its lease runs out
	case n < k.c.AbandonPct+k.c.NackPct:
		k.j.log("S? %s %d %d %d nack", tok, m.Receipt.Seq, m.Deliveries, time.Now().UnixNano())
		_ = m.Nack(time.Duration(r.IntN(3)) * 50 * time.Millisecond)
		return
	case n < k.c.AbandonPct+k.c.NackPct+2:
		k.j.log("S? %s %d %d %d dead", tok, m.Receipt.Seq, m.Deliveries, time.Now().UnixNano())
		_ = m.DeadLetter("kill loop")
		return
	case n < k.c.AbandonPct+k.c.NackPct+10:
		// extended late in its lease (half to 95 % of it held first), then
		// acked within the extended lease, or after it: in a goroutine of
		// its own, so that the consumer goes on dequeuing meanwhile
		hold := k.c.AckTimeout * time.Duration(50+r.IntN(46)) / 100
		go func() {
			time.Sleep(hold)
			k.extend(m, tok)
			time.Sleep(k.c.AckTimeout / 2)
			k.ack(m, tok)
		}()
		return
	}
	k.ack(m, tok)
}

// ack acks a delivery, journaled.
func (k *killChild) ack(m *queue.Message, tok string) {
	k.j.log("A? %s %d %d %d", tok, m.Receipt.Seq, m.Deliveries, time.Now().UnixNano())
	err := m.Ack()
	switch {
	case err == nil:
		k.j.log("A+ %s %d %d %d", tok, m.Receipt.Seq, m.Deliveries, time.Now().UnixNano())
	case errors.Is(err, queue.ErrLeaseLost):
		k.j.log("AL %s %d %d %d", tok, m.Receipt.Seq, m.Deliveries, time.Now().UnixNano())
	default:
		k.j.log("A! %s %d %d", tok, m.Receipt.Seq, m.Deliveries)
		pause(err)
	}
}

// extend extends a delivery's lease by an AckTimeout, journaled.
func (k *killChild) extend(m *queue.Message, tok string) {
	k.j.log("L? %s %d %d %d %d", tok, m.Receipt.Seq, m.Deliveries, time.Now().UnixNano(), k.c.AckTimeout)
	err := m.Extend(k.c.AckTimeout)
	switch {
	case err == nil:
		k.j.log("L+ %s %d %d %d", tok, m.Receipt.Seq, m.Deliveries, time.Now().UnixNano())
	case errors.Is(err, queue.ErrLeaseLost):
		k.j.log("LL %s %d %d %d", tok, m.Receipt.Seq, m.Deliveries, time.Now().UnixNano())
	default:
		k.j.log("L! %s %d %d", tok, m.Receipt.Seq, m.Deliveries)
		pause(err)
	}
}

// killSortedQueue is the kill loop's sorted queue (single-flight, int64
// sort keys), beside its ack queue on the same server.
const killSortedQueue = "killloop-sorted"

func openKillSorted(rdb redis.UniversalClient, c killChildConfig) (*redisq.Sorted[int64], error) {
	return redisq.OpenSorted[int64](context.Background(), rdb, killSortedQueue, &redisq.SortedOptions{
		Options:      redisq.Options{AckTimeout: c.AckTimeout, MaxDeliveries: c.MaxDeliveries, OpTimeout: time.Second},
		SingleFlight: true})
}

// publish publishes values under a few keys; a token is
// "c<cycle>.k<child>.s<number>", journaled with the id "s" (a sorted
// value has none).
func (k *killChild) publish(r *rand.Rand) {
	for {
		tok := fmt.Sprintf("c%d.k%d.s%d", k.c.Cycle, k.c.Child, k.newNumber())
		ctx, cancel := k.callContext(r)
		k.j.log("E? %s", tok)
		err := k.s.Publish(ctx, r.Int64N(1000), fmt.Sprint("key", r.IntN(8)), killPayload(tok))
		cancel()
		if err == nil {
			k.j.log("E+ %s s", tok)
			continue
		}
		k.j.log("E! %s", tok)
		pause(err)
	}
}

func (k *killChild) newNumber() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.next++
	return k.next
}

// pull pulls batches and acks, nacks or abandons each, journaling each
// value as a delivery and the batch's ack for each of its values.
func (k *killChild) pull(r *rand.Rand) {
	for {
		ctx, cancel := k.callContext(r)
		t0 := time.Now().UnixNano()
		bs, err := k.s.Pull(ctx, 1+r.IntN(8))
		cancel()
		t1 := time.Now().UnixNano()
		if err != nil {
			pause(err)
			continue
		}
		for _, b := range bs {
			k.settleBatch(r, b, k.pulled(b, t0, t1))
		}
	}
}

// pulled journals each value of a batch as a delivery, checking its
// payload, and returns the values' tokens (nil when one is not intact).
func (k *killChild) pulled(b *queue.Batch[int64], t0, t1 int64) []string {
	toks := make([]string, len(b.Values))
	for i, v := range b.Values {
		tok, intact := killToken(v.Payload)
		if !intact {
			k.j.log("X payload of key %s lease %d is not the one published: %q", b.Key, b.Receipt.Lease, v.Payload)
			return nil
		}
		k.j.log("D %s s %d %d %d %d", tok, b.Receipt.Lease, v.Deliveries, t0, t1)
		toks[i] = tok
	}
	return toks
}

func (k *killChild) settleBatch(r *rand.Rand, b *queue.Batch[int64], toks []string) {
	if toks == nil {
		return
	}
	n := r.IntN(100)
	switch {
	case n < k.c.AbandonPct:
		return
	case n < k.c.AbandonPct+k.c.NackPct:
		k.settlingBatch(b, toks, "nack")
		_ = b.Nack(time.Duration(r.IntN(3)) * 50 * time.Millisecond)
		return
	case n < k.c.AbandonPct+k.c.NackPct+2:
		k.settlingBatch(b, toks, "dead")
		_ = b.DeadLetter("kill loop")
		return
	}
	sent := time.Now().UnixNano()
	for i, tok := range toks {
		k.j.log("A? %s %d %d %d", tok, b.Receipt.Lease, b.Values[i].Deliveries, sent)
	}
	err := b.Ack()
	at := time.Now().UnixNano()
	for i, tok := range toks {
		switch {
		case err == nil:
			k.j.log("A+ %s %d %d %d", tok, b.Receipt.Lease, b.Values[i].Deliveries, at)
		case errors.Is(err, queue.ErrLeaseLost):
			k.j.log("AL %s %d %d %d", tok, b.Receipt.Lease, b.Values[i].Deliveries, at)
		default:
			k.j.log("A! %s %d %d", tok, b.Receipt.Lease, b.Values[i].Deliveries)
		}
	}
	pause(err)
}

// settlingBatch journals, for each value of a batch, a nack or
// dead-letter (how) about to be sent.
func (k *killChild) settlingBatch(b *queue.Batch[int64], toks []string, how string) {
	sent := time.Now().UnixNano()
	for i, tok := range toks {
		k.j.log("S? %s %d %d %d %s", tok, b.Receipt.Lease, b.Values[i].Deliveries, sent, how)
	}
}
