package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/walq/walq/fuzz"
	"github.com/walq/walq/queue"
)

// handoverOptions are the options TestKill9Handover's children open the
// queue with: the smallest segments and snapshots, so that compactions
// (the housekeeper's, Close's and the children's own) run all the time,
// and a LockTimeout that outlasts the other child's hold.
var handoverOptions = queue.Options{SegmentSize: gapSegment, SnapshotBytes: 1 << 10,
	AckTimeout: 150 * time.Millisecond, LockTimeout: time.Minute}

// TestKill9Handover runs two children on one queue directory, each
// opening it (waiting on LockTimeout while the other has it), running a
// burst of enqueues, deliveries, acks, nacks and dead letters, compacting
// and closing it, over and over: every Close hands the directory over to
// the other, and the small SnapshotBytes has compactions run throughout.
// Each cycle the parent SIGKILLs one of them at a random moment, waits
// for the other to take the directory over, kills that one too at a
// random moment, and checks the queue left behind with the oracle on a
// copy. The oracle also holds across the hand-overs themselves: no
// delivery after an ack returned, none of a message never enqueued.
//
// Short run: 6 cycles (3 under -race). Long run:
//
//	WALQ_CRASH_CYCLES=200 go test ./fuzz -run '^TestKill9Handover$' -timeout 1h -v
func TestKill9Handover(t *testing.T) {
	if cfg := childConfigFromEnv(t, "handover"); cfg != nil {
		runHandoverChild(cfg)
		return
	}
	rng, _ := testRand(t)
	dir, o := t.TempDir(), fuzz.NewOracle()
	h := &handoverParent{t: t, o: o, hist: make(map[string]string)}
	cycles := envInt(t, "WALQ_CRASH_CYCLES", scaled(6, 2))
	start := time.Now()
	for n := 1; n <= cycles; n++ {
		h.cycle(rng, dir, n)
	}
	h.check(dir, "final drain", false)
	t.Logf("SUMMARY handover: cycles=%d hand-overs=%d (after a kill: %d) %s in %v",
		cycles, h.opens, h.takeovers, o.Result(), time.Since(start).Round(time.Millisecond))
}

// handoverParent is TestKill9Handover's side.
type handoverParent struct {
	t         *testing.T
	o         *fuzz.Oracle
	hist      map[string]string // report codes by token, to explain a failure
	opens     int               // opens reported
	takeovers int               // opens by the survivor after the kill
}

// cycle runs two children on dir, kills one, waits for the other to take
// the directory over, kills it, and checks a copy of dir.
func (h *handoverParent) cycle(rng *rand.Rand, dir string, n int) {
	t := h.t
	var cs [2]*child
	lines := make(chan handoverLine, 64)
	for i := range cs {
		cs[i] = startChild(t, t.Name(), childConfig{Mode: "handover", Dir: dir, Cycle: 2*n + i,
			Seed: rng.Uint64(), Lifetime: time.Minute})
		go func() {
			for l := range cs[i].lines {
				lines <- handoverLine{i, l}
			}
			lines <- handoverLine{i, ""}
		}()
	}
	victim := rng.IntN(2)
	first := time.Duration(rng.Int64N(int64(400 * time.Millisecond)))
	if raceEnabled {
		first *= 3
	}
	killAt := time.After(first)
	var second <-chan time.Time
	tookOver := false           // the survivor reported an open after the kill
	open := [2]bool{true, true} // report streams not ended
	for open[0] || open[1] {
		select {
		case l := <-lines:
			switch {
			case l.line == "":
				open[l.from] = false
			case l.line[0] == 'o' && !tookOver && killAt == nil && l.from != victim:
				tookOver = true
				h.takeovers++
				second = time.After(time.Duration(rng.Int64N(int64(100 * time.Millisecond))))
			}
			h.apply(l)
		case <-killAt:
			killAt = nil
			cs[victim].kill() // an open the other reports from now on came after the kill
		case <-second:
			second = nil
			go cs[1-victim].kill()
		}
	}
	for i, c := range cs {
		<-c.done
		if !c.killed() {
			t.Fatalf("cycle %d: child %d was not killed but exited (%v); its output:\n%s", n, i, c.err, c.output())
		}
		if r := c.raceReport(); r != "" {
			t.Fatalf("cycle %d: the race detector found a data race in child %d:\n%s", n, i, r)
		}
	}
	h.check(dir, fmt.Sprintf("cycle %d (child %d killed after %v)", n, victim, first), true)
}

// handoverLine is a report line and the child that wrote it ("" once its
// reports ended).
type handoverLine struct {
	from int
	line string
}

// apply feeds one report line to the oracle and fails the test at once on
// what a child must not see.
func (h *handoverParent) apply(l handoverLine) {
	if len(l.line) < 1 {
		return
	}
	code, tok := l.line[0], ""
	if len(l.line) > 2 {
		tok = l.line[2:]
	}
	h.hist[tok] += string(code)
	switch code {
	case 'o':
		h.opens++
	case 'a':
		h.o.EnqueueAttempt(tok)
	case 'e':
		h.o.Enqueued(tok)
	case 'd':
		h.o.Delivered(tok)
	case 'k':
		h.o.AckAttempt(tok)
	case 'K':
		h.o.Acked(tok)
	case 'x':
		h.o.AckFailed(tok)
	case 'R':
		h.o.Released(tok)
	case '!':
		h.t.Fatalf("child %d saw: %s", l.from, tok)
	}
	checkLive(h.t, fmt.Sprintf("child %d", l.from), h.o, h.hist)
}

// check drains dir (a copy of it with copy) and feeds the drain to the
// oracle.
func (h *handoverParent) check(dir, what string, copy bool) {
	t := h.t
	img := dir
	if copy {
		img = scratchDir(t)
		defer os.RemoveAll(img)
		if err := copyDir(dir, img); err != nil {
			t.Fatal(err)
		}
	}
	d, err := drainWith(img, drainOptionsAs(gapSegment))
	if err != nil {
		t.Fatalf("%s: drain: %v", what, err)
	}
	for i, p := range d.payloads {
		if want := payload(d.tokens[i], handoverPad(d.tokens[i])); string(p) != string(want) {
			t.Fatalf("%s: %s came back with a wrong payload (%d bytes)", what, d.tokens[i], len(p))
		}
	}
	if r := h.o.Recovered(d.tokens); !r.OK() {
		tok, _, _ := strings.Cut(r.Examples[0], ":")
		t.Fatalf("%s: %s; report codes of %s: %q", what, r, tok, h.hist[tok])
	}
}

// handoverPad is the padding of tok's payload: it depends on the token,
// so a payload read from another message's record differs.
func handoverPad(tok string) int {
	n := 0
	for _, b := range []byte(tok) {
		n = n*31 + int(b)
	}
	return n % 300
}

// runHandoverChild opens, works on and closes the queue in cfg.Dir until
// it is killed.
func runHandoverChild(cfg *childConfig) {
	rep := newReporter()
	go func() {
		time.Sleep(cfg.Lifetime)
		os.Exit(0) // the parent is gone
	}()
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	opts := handoverOptions
	opts.Sync = queue.SyncMode(rng.IntN(3))
	for burst := 0; ; burst++ {
		q, err := queue.Open(cfg.Dir, &opts)
		if err != nil {
			rep.failf("open: %v", err)
			select {}
		}
		rep.line('o', "")
		if err := handoverBurst(rep, q, rng, fmt.Sprintf("H%d.%d", cfg.Cycle, burst)); err != nil {
			rep.failf("%v", err)
		}
		if err := q.Close(); err != nil {
			rep.failf("close: %v", err)
		}
		rep.line('c', "")
	}
}

// handoverBurst runs a few dozen calls on q: enqueues (tokens named from
// prefix), deliveries that are acked, nacked, dead-lettered or left to
// run out, requeues of the dead letters, and now and then a compaction.
func handoverBurst(rep *reporter, q *queue.Queue, rng *rand.Rand, prefix string) error {
	ctx := context.Background()
	for i := range 20 + rng.IntN(60) {
		switch r := rng.IntN(100); {
		case r < 45:
			tok := fmt.Sprintf("%s.%d", prefix, i)
			rep.line('a', tok)
			if _, err := q.Enqueue(ctx, payload(tok, handoverPad(tok))); err != nil {
				return fmt.Errorf("enqueue %s: %w", tok, err)
			}
			rep.line('e', tok)
		case r < 90:
			if err := handoverDeliver(rep, q, rng); err != nil {
				return err
			}
		case r < 95:
			if _, err := q.RequeueAllDead(); err != nil {
				return fmt.Errorf("requeue dead: %w", err)
			}
		default:
			if err := q.Compact(); err != nil {
				return fmt.Errorf("compact: %w", err)
			}
		}
	}
	return nil
}

// handoverDeliver takes a message, if one is ready, and acks, nacks,
// dead-letters or forgets it.
func handoverDeliver(rep *reporter, q *queue.Queue, rng *rand.Rand) error {
	m, err := q.TryDequeue()
	if errors.Is(err, queue.ErrEmpty) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dequeue: %w", err)
	}
	tok := tokenOf(m.Payload)
	if want := payload(tok, handoverPad(tok)); string(m.Payload) != string(want) {
		return fmt.Errorf("%s delivered with a wrong payload (%d bytes)", tok, len(m.Payload))
	}
	rep.line('d', tok)
	switch r := rng.IntN(100); {
	case r < 60:
		rep.line('k', tok)
		switch err := m.Ack(); {
		case err == nil:
			rep.line('K', tok)
		case errors.Is(err, queue.ErrLeaseLost):
			rep.line('x', tok)
		default:
			return fmt.Errorf("ack %s: %w", tok, err)
		}
	case r < 75:
		return handoverRelease(rep, tok, m.Nack(0))
	case r < 82:
		return handoverRelease(rep, tok, m.DeadLetter("handover test"))
	}
	return nil // forgotten: its lease runs out, or the next open ends it
}

// handoverRelease reports a nack's or dead-letter's outcome.
func handoverRelease(rep *reporter, tok string, err error) error {
	switch {
	case err == nil:
		rep.line('R', tok)
	case !errors.Is(err, queue.ErrLeaseLost):
		return fmt.Errorf("release %s: %w", tok, err)
	}
	return nil
}
