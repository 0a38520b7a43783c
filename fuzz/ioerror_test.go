package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walq/walq/fuzz"
	"github.com/walq/walq/internal/tmpfs"
	"github.com/walq/walq/queue"
)

// TestIOErrors makes the disk fail under a queue in a child process and
// checks that the caller gets the error, that nothing is falsely
// acknowledged, that a failed log write is sticky (later writes fail too,
// even once the disk works again) and that a reopen without the fault is
// consistent with everything acknowledged.
//
//   - write: RLIMIT_FSIZE below the segment size, SIGXFSZ ignored, so that
//     the write that crosses the limit fails with EFBIG (partially written);
//     persistent, or lifted right after the first failure ("once");
//   - snapshot: the limit above the segment size but below the snapshot,
//     so that only the snapshot's write fails (the log is healthy, so the
//     queue goes on; after the limit is lifted the next snapshot succeeds);
//   - full: a 256 KiB tmpfs (needs mount(2); skipped with the reason when
//     it fails, failed under CI), so that segment and snapshot writes fail with ENOSPC;
//   - inodes: a tmpfs with a handful of inodes, so that creating the next
//     segment or snapshot file fails.
//
// An enqueue or ack that returned an error counts as an attempt: it may or
// may not have taken effect (the write may have reached the file before
// the failure); everything that returned success must be there.
func TestIOErrors(t *testing.T) {
	if cfg := childConfigFromEnv(t, "ioerror"); cfg != nil {
		runIOErrorChild(cfg)
		return
	}
	rng, _ := testRand(t)
	runs := scaled(4, 4)
	cases := []struct {
		name     string
		limit    func() int64
		segment  int64
		once     bool
		mount    string // tmpfs options; "" for none
		wantLog  bool   // a log write must fail
		wantSnap bool   // a snapshot write must fail
	}{
		{"write persistent", func() int64 { return 16<<10 + rng.Int64N(80<<10) }, 1 << 20, false, "", true, false},
		{"write once", func() int64 { return 16<<10 + rng.Int64N(80<<10) }, 1 << 20, true, "", true, false},
		{"snapshot persistent", func() int64 { return 12 << 10 }, 4096, false, "", false, true},
		{"snapshot once", func() int64 { return 12 << 10 }, 4096, true, "", false, true},
		{"full filesystem", func() int64 { return 0 }, 32 << 10, false, "size=256k", true, false},
		{"no inodes", func() int64 { return 0 }, 8 << 10, false, "size=64m,nr_inodes=8", true, false},
	}
	var total fuzz.Result
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := 0; i < runs; i++ {
				dir := t.TempDir()
				if c.mount != "" {
					dir = filepath.Join(tmpfs.Mount(t, c.mount), "q")
				}
				cfg := childConfig{Mode: "ioerror", Dir: dir, Seed: rng.Uint64(), Limit: c.limit(), Once: c.once,
					Segment: c.segment, Lifetime: time.Minute}
				r := runIOErrorCase(t, cfg, c.wantLog, c.wantSnap, c.mount != "")
				total = total.Add(r)
			}
		})
	}
	t.Logf("SUMMARY ioerror: runs=%d %s", runs*len(cases), total)
}

// runIOErrorCase runs one child to its end and checks its report and the
// reopened queue.
func runIOErrorCase(t *testing.T, cfg childConfig, wantLog, wantSnap, copyOut bool) fuzz.Result {
	t.Helper()
	o := fuzz.NewOracle()
	c := startChild(t, "TestIOErrors", cfg)
	var fails, snaps, bad []string
	notes := make(map[string]int)
	timeout := time.After(time.Minute)
	for lines := c.lines; lines != nil; {
		select {
		case l, ok := <-lines:
			if !ok {
				lines = nil
				continue
			}
			switch code, arg := l[0], l[2:]; code {
			case 'F':
				fails = append(fails, arg)
			case 'S':
				snaps = append(snaps, arg)
			case '!':
				bad = append(bad, arg)
			case 'n':
				notes[arg]++
			default:
				applyAck(o, code, arg)
			}
		case <-timeout:
			c.kill()
			t.Fatalf("the child did not finish within a minute; its output:\n%s", c.output())
		}
	}
	<-c.done
	what := fmt.Sprintf("limit %d, once %v, segment %d", cfg.Limit, cfg.Once, cfg.Segment)
	switch {
	case c.err != nil:
		t.Fatalf("%s: the child failed (%v); its output:\n%s", what, c.err, c.output())
	case len(bad) > 0:
		t.Fatalf("%s: %s", what, strings.Join(bad, "; "))
	case wantLog && len(fails) == 0:
		t.Fatalf("%s: no log write failed", what)
	case wantSnap && len(snaps) == 0:
		t.Fatalf("%s: no snapshot write failed", what)
	}
	check := cfg.Dir
	if copyOut { // a full tmpfs: reopen a copy elsewhere
		check = t.TempDir()
		if err := copyDir(cfg.Dir, check); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := queue.Verify(check, nil); err != nil {
		t.Fatalf("%s: Verify after the failure: %v", what, err)
	}
	d, err := drainQueue(check)
	if err != nil {
		t.Fatalf("%s: reopen without the fault: %v", what, err)
	}
	r := o.Recovered(d.tokens)
	if !r.OK() {
		t.Fatalf("%s: %s", what, r)
	}
	t.Logf("%s: log failure %q; snapshot failures %d; notes %v; %s", what, fails, len(snaps), notes, r)
	return o.Result()
}

// applyAck feeds an ack queue report line to an oracle.
func applyAck(o *fuzz.Oracle, code byte, tok string) {
	switch code {
	case 'a':
		o.EnqueueAttempt(tok)
	case 'e':
		o.Enqueued(tok)
	case 'd':
		o.Delivered(tok)
	case 'k':
		o.AckAttempt(tok)
	case 'K':
		o.Acked(tok)
	case 'x':
		o.AckFailed(tok)
	}
}

// ioChild is the child side of TestIOErrors.
type ioChild struct {
	cfg       *childConfig
	rep       *reporter
	q         *queue.Queue
	rng       *rand.Rand
	held      []*queue.Message
	n         int
	broken    error // the first log failure
	snapFails int   // failed snapshots
}

// runIOErrorChild runs operations until a log write fails (or 3000 have
// run), checks that the failure is sticky, closes and exits.
func runIOErrorChild(cfg *childConfig) {
	c := &ioChild{cfg: cfg, rep: newReporter(), rng: rand.New(rand.NewPCG(cfg.Seed, 1))}
	go func() {
		time.Sleep(cfg.Lifetime)
		os.Exit(0)
	}()
	signal.Ignore(syscall.SIGXFSZ)
	if cfg.Limit > 0 {
		setFileLimit(c.rep, uint64(cfg.Limit))
	}
	var err error
	c.q, err = queue.Open(cfg.Dir, &queue.Options{SegmentSize: cfg.Segment, SnapshotBytes: 1 << 30,
		ManualRequeue: true, MaxDeliveries: -1})
	if err != nil {
		c.rep.failf("open: %v", err)
		os.Exit(0)
	}
	// The snapshot cases (a file size limit above the segment size) end
	// after a few failed snapshots; the others run until the log fails.
	for i := 0; i < 3000 && c.broken == nil && (c.snapFails < 3 || cfg.Limit == 0); i++ {
		c.step()
	}
	if c.broken != nil {
		if cfg.Once {
			setFileLimit(c.rep, noLimit)
		}
		c.checkSticky()
	}
	err = c.q.Close()
	if c.broken != nil && err == nil {
		c.rep.failf("Close returned nil after the log failed")
	}
	os.Exit(0)
}

// noLimit is RLIM_INFINITY.
const noLimit = ^uint64(0)

func setFileLimit(rep *reporter, n uint64) {
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, fileLimit(n)); err != nil {
		rep.failf("setrlimit: %v", err)
		os.Exit(0)
	}
}

// step runs one operation; a failure of the log is recorded as broken.
func (c *ioChild) step() {
	switch r := c.rng.IntN(100); {
	case r < 15:
		c.enqueueAsync(1 + c.rng.IntN(8))
	case r < 55:
		c.n++
		tok := fmt.Sprintf("I%d", c.n)
		c.rep.line('a', tok)
		if _, err := c.q.Enqueue(context.Background(), payload(tok, 50+c.rng.IntN(400))); err != nil {
			c.logFailed("enqueue", err)
			return
		}
		c.rep.line('e', tok)
	case r < 80:
		m, err := c.q.TryDequeue()
		switch {
		case errors.Is(err, queue.ErrEmpty):
		case err != nil:
			c.logFailed("dequeue", err)
		default:
			c.rep.line('d', tokenOf(m.Payload))
			c.held = append(c.held, m)
		}
	case r < 95:
		c.ack()
	default:
		c.compact()
	}
}

// enqueueAsync streams n enqueues, then waits for their Pendings in order.
// Once one fails, every later one must fail too, with the injected cause:
// the failure is sticky and fails every commit in flight.
func (c *ioChild) enqueueAsync(n int) {
	toks := make([]string, 0, n)
	ps := make([]*queue.Pending, 0, n)
	for range n {
		c.n++
		tok := fmt.Sprintf("I%d", c.n)
		c.rep.line('a', tok)
		p, err := c.q.EnqueueAsync(context.Background(), payload(tok, 50+c.rng.IntN(400)))
		if err != nil {
			c.logFailed("async enqueue", err)
			break
		}
		toks, ps = append(toks, tok), append(ps, p)
	}
	var failed error
	for i, p := range ps {
		err := p.Wait(context.Background())
		switch {
		case err == nil && failed != nil:
			c.rep.failf("async enqueue %s succeeded after an earlier one failed with %v", toks[i], failed)
		case err == nil:
			c.rep.line('e', toks[i])
		case failed == nil:
			failed = err
			c.logFailed("async enqueue", err)
		case !errors.Is(err, syscall.EFBIG) && !errors.Is(err, syscall.ENOSPC):
			c.rep.failf("async enqueue %s failed without the injected cause: %v", toks[i], err)
		}
	}
}

// ack acks a held message, keeping some of them leased (they grow the
// snapshot); half the time with AckAsync.
func (c *ioChild) ack() {
	if len(c.held) < 5 {
		return
	}
	m := c.held[0]
	c.held = c.held[1:]
	tok := tokenOf(m.Payload)
	c.rep.line('k', tok)
	var err error
	if c.rng.IntN(2) == 0 {
		var p *queue.Pending
		if p, err = m.AckAsync(); err == nil {
			err = p.Wait(context.Background())
		}
	} else {
		err = m.Ack()
	}
	if err != nil {
		c.logFailed("ack", err) // the outcome of the ack is unknown: no 'x'
		return
	}
	c.rep.line('K', tok)
}

// compact takes a snapshot. A failed snapshot write is not a log failure:
// the log must still take writes, which a probe enqueue checks (a failed
// truncation, though, poisons the log). Once the limit is lifted
// ("once"), the next snapshot must work.
func (c *ioChild) compact() {
	err := c.q.Compact()
	if err == nil {
		return
	}
	if !errors.Is(err, syscall.EFBIG) && !errors.Is(err, syscall.ENOSPC) {
		c.rep.failf("compact failed without the injected cause (EFBIG/ENOSPC) in its chain: %v", err)
	}
	c.n++
	tok := fmt.Sprintf("I%d", c.n)
	c.rep.line('a', tok)
	if _, perr := c.q.Enqueue(context.Background(), payload(tok, 10)); perr != nil {
		c.logFailed("compact", err)
		return
	}
	c.rep.line('e', tok)
	c.rep.line('S', oneLine(err))
	c.snapFails++
	if c.cfg.Once && c.cfg.Limit > 0 {
		setFileLimit(c.rep, noLimit)
		if err := c.q.Compact(); err != nil {
			c.rep.failf("snapshot after the limit was lifted: %v", err)
		}
		setFileLimit(c.rep, uint64(c.cfg.Limit))
	}
}

// logFailed records the first failure of the log; the error must carry the
// injected cause.
func (c *ioChild) logFailed(op string, err error) {
	if !errors.Is(err, syscall.EFBIG) && !errors.Is(err, syscall.ENOSPC) {
		c.rep.failf("%s failed without the injected cause (EFBIG/ENOSPC) in its chain: %v", op, err)
	}
	c.rep.line('F', op+": "+oneLine(err))
	c.broken = err
}

// checkSticky tries every kind of write after the failure: each must fail.
func (c *ioChild) checkSticky() {
	c.n++
	tok := fmt.Sprintf("I%d", c.n)
	c.rep.line('a', tok)
	if _, err := c.q.Enqueue(context.Background(), payload(tok, 10)); err == nil {
		c.rep.failf("not sticky: an enqueue succeeded after %v", c.broken)
		c.rep.line('e', tok)
	}
	if len(c.held) > 0 {
		m := c.held[0]
		c.rep.line('k', tokenOf(m.Payload))
		if err := m.Ack(); err == nil {
			c.rep.failf("not sticky: an ack succeeded after %v", c.broken)
			c.rep.line('K', tokenOf(m.Payload))
		}
		if err := m.Nack(0); err == nil {
			c.rep.failf("not sticky: a nack succeeded after %v", c.broken)
		}
	}
	if p, err := c.q.EnqueueAsync(context.Background(), payload(tok+"async", 10)); err == nil {
		if err := p.Wait(context.Background()); err == nil {
			c.rep.failf("not sticky: an async enqueue succeeded after %v", c.broken)
		}
	}
	if m, err := c.q.TryDequeue(); err == nil {
		c.rep.failf("not sticky: a dequeue succeeded after %v", c.broken)
		c.rep.line('d', tokenOf(m.Payload))
	}
	before := snapshotNames(c.cfg.Dir)
	if err := c.q.Compact(); err == nil {
		c.rep.failf("not sticky: Compact returned nil after %v", c.broken)
	}
	if after := snapshotNames(c.cfg.Dir); after != before {
		c.rep.failf("not sticky: a snapshot was written after %v (%s, then %s)", c.broken, before, after)
	}
}

// snapshotNames lists the snapshot files in dir.
func snapshotNames(dir string) string {
	m, _ := filepath.Glob(filepath.Join(dir, "snapshot-*.snap"))
	return strings.Join(m, ",")
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }
