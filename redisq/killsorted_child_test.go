package redisq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
)

// The sorted kill loop's children (TestKillLoopSorted) publish to and pull
// from a sorted queue (int64 sort keys) and a windowed queue, each with
// or without SingleFlight as the parent drew for the cycle, until the
// parent kills them, journaling what each call returned
// as the ack loop's children do (one write(2) per line, before the result
// is used). The lines, fields separated by spaces, times in Unix
// nanoseconds:
//
//	P? tok q key sort t0    a publish of tok under key to queue q ("s" or "w") is about
//	                        to be sent at t0 (sort: its sort key; windowed: 0)
//	P+ tok t1               it returned nil at t1
//	P! tok                  it returned another error (it may have run)
//	B q t0 t1 win [| lease key v...]...
//	                        a Pull of q called at t0 returned at t1 with the batches
//	                        listed in order, each value v as tok:sort:publishedAt:deliveries
//	                        (windowed: sort in Unix ns); win is the puller's Window (0: sorted)
//	X text                  a value whose payload is not one published
//	S? q op lease t arg     a settle (ack, nack, dead) of a batch is about to be sent at t
//	                        (arg: a nack's delay, else 0)
//	S+ q op lease t         it returned nil at t
//	SL q op lease t         it returned ErrLeaseLost at t
//	S! q op lease           it returned another error (it may have run)
//	E? q lease t d          an Extend of a batch's lease by d (ns) is about to be sent at t,
//	                        before the batch is settled or left to run out (one or two
//	                        of them, in order)
//	E+ q lease t            it returned nil at t
//	EL q lease t            it returned ErrLeaseLost at t
//	E! q lease              it returned another error (it may have run)
//
// A token is "c<cycle>.k<child>.<q><publisher>.n<number>": the numbers of
// one publisher rise, each publish returned before the next was sent.

// sortedKillEnv makes the test binary a sorted kill-loop child; its value
// is the child's settings (sortedKillConfig, as JSON).
const sortedKillEnv = "WALQ_REDISQ_KILLSORTED_CHILD"

// The sorted kill loop's queues. Each cycle draws SingleFlight for each
// (sortedKillConfig), and the parent records it in the queue while no
// handle is open (setSingle), so both settings go through the loop on
// both queues, and a queue switched from one to the other with batches
// out of the cycle before.
const (
	killSortedLoopQueue   = "killsorted"
	killWindowedLoopQueue = "killwindowed"
)

// init runs the test binary as a sorted kill-loop child when the parent
// re-executed it so.
func init() {
	if cfg := os.Getenv(sortedKillEnv); cfg != "" {
		os.Exit(runSortedKillChild(cfg))
	}
}

// sortedKillConfig is what a sorted kill-loop child does, chosen by the
// parent per cycle.
type sortedKillConfig struct {
	Addr, Journal       string
	Cycle, Child        int
	Seed                uint64
	AckTimeout, Window  time.Duration
	MaxDeliveries       int // this child's own, drawn per child: handles of one queue apply different limits
	Publishers, Pullers int // per queue
	NackPct, AbandonPct int // percent of batches nacked; left to run out
	DeadPct, ShortPct   int // percent of batches dead-lettered; of calls under a short context
	SortRange, KeyRange int // sort keys drawn in [0, SortRange), keys key0..key<KeyRange-1>
	ExtendPct           int // percent of batches whose lease is extended before their settle (or abandon)
	// DoomPct is the percent of batches of key0 given back at once (a
	// nack without delay) or left to run out, so that key0's values
	// gather deliveries under the children without a limit (or a higher
	// one) and reach the limit of another child at its pull.
	DoomPct int
	// HoldPct is the percent of the other batches held a while (up to
	// half the lease, 300 ms at most) before their settle, so that pulls
	// of other children run while a lease is held.
	HoldPct int
	// SortedSingle and WindowedSingle are the queues' SingleFlight this
	// cycle, recorded in the queues by the parent before the children start.
	SortedSingle, WindowedSingle bool
}

// sortedKillChild is one sorted kill-loop child's traffic.
type sortedKillChild struct {
	c sortedKillConfig
	j *journal
}

// runSortedKillChild runs a sorted kill-loop child with the settings in
// env (sortedKillConfig as JSON) until it is killed; it returns the exit
// code only when it cannot start.
func runSortedKillChild(env string) int {
	var c sortedKillConfig
	if err := json.Unmarshal([]byte(env), &c); err != nil {
		fmt.Fprintln(os.Stderr, "sorted kill-loop child config:", err)
		return 2
	}
	j, rdb, err := startKillChild(c.Journal, c.Addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	o := redisq.Options{AckTimeout: c.AckTimeout, MaxDeliveries: c.MaxDeliveries, OpTimeout: time.Second}
	s := openUntil(func() (*redisq.Sorted[int64], error) {
		return redisq.OpenSorted[int64](context.Background(), rdb, killSortedLoopQueue,
			&redisq.SortedOptions{Options: o, SingleFlight: c.SortedSingle})
	})
	w := openUntil(func() (*redisq.Windowed, error) {
		return redisq.OpenWindowed(context.Background(), rdb, killWindowedLoopQueue,
			&redisq.WindowOptions{SortedOptions: redisq.SortedOptions{Options: o, SingleFlight: c.WindowedSingle}, Window: c.Window})
	})
	k := &sortedKillChild{c: c, j: j}
	var wg sync.WaitGroup
	for p := range c.Publishers {
		wg.Go(func() { k.publish("s", p, s.Publish) })
		wg.Go(func() {
			k.publish("w", p, func(ctx context.Context, _ int64, key string, payload []byte) error {
				return w.Publish(ctx, key, payload)
			})
		})
	}
	for n := range c.Pullers {
		wg.Go(func() {
			pullKill(k, "s", 0, rand.New(rand.NewPCG(c.Seed, uint64(300+n))), s.Pull, func(v int64) int64 { return v })
		})
		wg.Go(func() {
			pullKill(k, "w", c.Window, rand.New(rand.NewPCG(c.Seed, uint64(400+n))), w.Pull, time.Time.UnixNano)
		})
	}
	wg.Wait() // never: the parent kills the process
	return 0
}

// callContext is a call's context: now and then one that ends within a
// few milliseconds, so that calls leave while in flight.
func (k *sortedKillChild) callContext(r *rand.Rand) (context.Context, context.CancelFunc) {
	if r.IntN(100) < k.c.ShortPct {
		return context.WithTimeout(context.Background(), time.Duration(1+r.IntN(20))*time.Millisecond)
	}
	return context.WithTimeout(context.Background(), 5*time.Second)
}

// publish publishes values to queue q (publisher p of this child) until
// the process is killed. A publish whose outcome is unknown is not sent
// again (a sorted value has no id: it would be published twice).
func (k *sortedKillChild) publish(q string, p int, publish func(context.Context, int64, string, []byte) error) {
	r := rand.New(rand.NewPCG(k.c.Seed, uint64(map[string]int{"s": 100, "w": 200}[q]+p)))
	for n := 1; ; n++ {
		tok := fmt.Sprintf("c%d.k%d.%s%d.n%d", k.c.Cycle, k.c.Child, q, p, n)
		key := fmt.Sprint("key", r.IntN(k.c.KeyRange))
		var sort int64
		if q == "s" {
			sort = r.Int64N(int64(k.c.SortRange))
		}
		ctx, cancel := k.callContext(r)
		k.j.log("P? %s %s %s %d %d", tok, q, key, sort, time.Now().UnixNano())
		err := publish(ctx, sort, key, killPayload(tok))
		t1 := time.Now().UnixNano()
		cancel()
		if err == nil {
			k.j.log("P+ %s %d", tok, t1)
			continue
		}
		k.j.log("P! %s", tok)
		pause(err)
	}
}

// pullKill pulls batches from queue q until the process is killed,
// journaling each Pull whole in one line, and settles each batch.
func pullKill[K queue.SortKey](k *sortedKillChild, q string, win time.Duration, r *rand.Rand,
	pull func(context.Context, int) ([]*queue.Batch[K], error), sortNs func(K) int64) {
	for {
		ctx, cancel := k.callContext(r)
		t0 := time.Now().UnixNano()
		bs, err := pull(ctx, 1+r.IntN(8))
		cancel()
		t1 := time.Now().UnixNano()
		if err != nil {
			pause(err)
			continue
		}
		var line strings.Builder
		fmt.Fprintf(&line, "B %s %d %d %d", q, t0, t1, win)
		for _, b := range bs {
			fmt.Fprintf(&line, " | %d %s", b.Receipt.Lease, b.Key)
			for _, v := range b.Values {
				tok, intact := killToken(v.Payload)
				if !intact {
					k.j.log("X payload of %s key %s lease %d is not one published: %q", q, b.Key, b.Receipt.Lease, v.Payload)
					tok = "?"
				}
				fmt.Fprintf(&line, " %s:%d:%d:%d", tok, sortNs(v.Sort), v.PublishedAt.UnixNano(), v.Deliveries)
			}
		}
		k.j.log("%s", line.String())
		for _, b := range bs {
			settleKill(k, q, r, b)
		}
	}
}

// settlePlan is what a puller does with one batch, drawn from the
// puller's generator before any of it is done, so that a batch held a
// while is settled by a goroutine of its own while the puller pulls on.
type settlePlan struct {
	hold    time.Duration // held before anything is sent (the sleep holds a lease as a slow consumer does)
	extend  bool          // its lease extended (extendKill) before its settle or abandon
	extD    time.Duration // the Extend's d
	extHold int           // percent of extD held after an Extend that returned nil, before the settle (0: none)
	// extAgain is a second Extend by extD, sent once extAgain percent of
	// the first one's d has passed (0: none), near the deadline the
	// first set; extHold then follows the second.
	extAgain int
	op       string        // the settle: "ack", "nack", "dead"; "" leaves the lease to run out
	arg      time.Duration // a nack's delay
}

// drawSettle draws what a puller does with a batch of key: a batch of
// key0, DoomPct of the time, given back at once (a nack without delay)
// or left to run out; else an Extend (ExtendPct), a third of those left
// to run out and half the rest settled within the extended lease, often
// past its first deadline, or a hold (HoldPct) of up to half the lease
// (300 ms at most); then an ack, nack, dead-letter or abandon. Under a
// lease of 300 ms or less, half the Extends are sent late in the lease
// (50 to 95 % of it held first); under any, half of them are followed by
// a second Extend as late in the first one's d (1.5 s at most), so that
// Extends meet a deadline close ahead, where a lease wrongly judged lost
// or a deadline written short shows.
func drawSettle(k *sortedKillChild, r *rand.Rand, key string) settlePlan {
	if key == "key0" && r.IntN(100) < k.c.DoomPct {
		return settlePlan{op: pick(r, "", "nack")}
	}
	var p settlePlan
	if r.IntN(100) < k.c.ExtendPct {
		p.extend, p.extD = true, time.Duration(1+r.IntN(3))*min(k.c.AckTimeout, 500*time.Millisecond)
		if k.c.AckTimeout <= 300*time.Millisecond && r.IntN(2) == 0 {
			p.hold = k.c.AckTimeout * time.Duration(50+r.IntN(46)) / 100
		}
		if r.IntN(2) == 0 {
			p.extAgain = 50 + r.IntN(46)
		}
		if r.IntN(3) == 0 {
			return p // held to the extend's deadline, then runs out
		}
		if r.IntN(2) == 0 {
			p.extHold = 40 + r.IntN(50)
		}
	} else if r.IntN(100) < k.c.HoldPct {
		p.hold = time.Duration(1 + r.Int64N(int64(min(k.c.AckTimeout/2, 300*time.Millisecond))))
	}
	n := r.IntN(100)
	p.op = "ack"
	switch {
	case n < k.c.AbandonPct:
		p.op = "" // its lease runs out
	case n < k.c.AbandonPct+k.c.NackPct:
		p.op, p.arg = "nack", time.Duration(r.IntN(3))*50*time.Millisecond
	case n < k.c.AbandonPct+k.c.NackPct+k.c.DeadPct:
		p.op = "dead"
	}
	return p
}

// settleKill does with a batch what drawSettle drew: in the puller's
// goroutine, or, when it holds the batch a while, in one of its own.
func settleKill[K queue.SortKey](k *sortedKillChild, q string, r *rand.Rand, b *queue.Batch[K]) {
	p := drawSettle(k, r, b.Key)
	if p.hold > 0 || p.extHold > 0 || p.extAgain > 0 {
		go runSettle(k, q, b, p)
		return
	}
	runSettle(k, q, b, p)
}

// runSettle holds, extends and settles a batch as p says.
func runSettle[K queue.SortKey](k *sortedKillChild, q string, b *queue.Batch[K], p settlePlan) {
	time.Sleep(p.hold)
	extended := p.extend && extendKill(k, q, b, p.extD)
	if extended && p.extAgain > 0 {
		time.Sleep(p.extD * time.Duration(p.extAgain) / 100)
		extended = extendKill(k, q, b, p.extD)
	}
	if extended && p.op != "" {
		time.Sleep(p.extD * time.Duration(p.extHold) / 100)
	}
	if p.op != "" {
		settleOp(k, q, b, p.op, p.arg)
	}
}

// settleOp sends one settle of a batch (op ack, nack with delay arg, or
// dead), journaled.
func settleOp[K queue.SortKey](k *sortedKillChild, q string, b *queue.Batch[K], op string, arg time.Duration) {
	k.j.log("S? %s %s %d %d %d", q, op, b.Receipt.Lease, time.Now().UnixNano(), arg)
	var err error
	switch op {
	case "ack":
		err = b.Ack()
	case "nack":
		err = b.Nack(arg)
	case "dead":
		err = b.DeadLetter("kill loop")
	}
	switch {
	case err == nil:
		k.j.log("S+ %s %s %d %d", q, op, b.Receipt.Lease, time.Now().UnixNano())
	case errors.Is(err, queue.ErrLeaseLost):
		k.j.log("SL %s %s %d %d", q, op, b.Receipt.Lease, time.Now().UnixNano())
	default:
		k.j.log("S! %s %s %d", q, op, b.Receipt.Lease)
		pause(err)
	}
}

// extendKill sets a batch's lease to run out d from now (drawSettle: one
// to three AckTimeouts, 500ms at most each): mostly past its first
// deadline, so that a batch left to run out afterwards is held longer;
// under a long AckTimeout, sooner. It reports whether the Extend returned
// nil.
func extendKill[K queue.SortKey](k *sortedKillChild, q string, b *queue.Batch[K], d time.Duration) bool {
	k.j.log("E? %s %d %d %d", q, b.Receipt.Lease, time.Now().UnixNano(), d)
	err := b.Extend(d)
	switch {
	case err == nil:
		k.j.log("E+ %s %d %d", q, b.Receipt.Lease, time.Now().UnixNano())
		return true
	case errors.Is(err, queue.ErrLeaseLost):
		k.j.log("EL %s %d %d", q, b.Receipt.Lease, time.Now().UnixNano())
	default:
		k.j.log("E! %s %d", q, b.Receipt.Lease)
		pause(err)
	}
	return false
}
