package fuzz_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walq/walq/fuzz"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// gapPoint is a point of a compaction at which TestKill9CompactionGaps's
// child kills itself: a compaction point (testhook.SetCompactStep) reached
// for the at-th time, or ("snap-" + step) a snapshot step of the
// compaction's second snapshot, the one written once the copies are.
type gapPoint struct {
	name string
	at   int // 1 for the first time the point is reached
}

// gapPoints are the ack queue's points, in the order a compaction reaches
// them: the copies of the indexed messages (dead, leased, ready again,
// delayed), those of the never-delivered ones from the cursor on (under
// the lock, the advance record not yet appended), the advance appended,
// the copies durable, each step of the snapshot that covers them, and the
// front truncation it allows. At each point the child first makes what
// the log holds durable, so the crash keeps every copy appended so far
// and nothing after it: the state a group commit that wrote the copies in
// one entry and the advance in the next leaves. From "flushed" on it
// kills without a flush of its own.
var gapPoints = []gapPoint{{"copy", 1}, {"copy", 5}, {"indexed", 1}, {"cursor-copy", 1}, {"cursor-copy", 10},
	{"copied", 1}, {"advanced", 1}, {"flushed", 1}, {"snap-written", 1}, {"snap-synced", 1},
	{"snap-renamed", 1}, {"snap-dir-synced", 1}, {"snap-removed", 1}, {"truncated", 1}}

// sortedGapPoints are a sorted (or windowed) queue's: it has no cursor
// region (every value is indexed), so a compaction appends no cursor
// copies and no advance record.
var sortedGapPoints = []gapPoint{{"copy", 1}, {"copy", 5}, {"indexed", 1}, {"flushed", 1}, {"snap-written", 1},
	{"snap-synced", 1}, {"snap-renamed", 1}, {"snap-dir-synced", 1}, {"snap-removed", 1}, {"truncated", 1}}

// gapSegment is the children's segment size: small, so that the held
// messages pin whole segments and the compaction copies them forward.
const gapSegment = 4096

// TestKill9CompactionGaps aims a SIGKILL at each point of a compaction
// that copies live messages forward, for the ack queue, Sorted[K] and
// Windowed: a child builds a queue whose oldest segments hold acked,
// dead-lettered, nacked, leased, delayed and never-delivered messages
// (values, for the sorted forms) under a long log of extends, compacts
// it, and kills itself at the point (gapPoints). The reopened queue must
// hold exactly the messages that were not acked, each once with its own
// payload, and exactly the dead letters it held, with theirs.
func TestKill9CompactionGaps(t *testing.T) {
	if cfg := childConfigFromEnv(t, "kill9gap"); cfg != nil {
		runGapChild(cfg)
		return
	}
	for _, kind := range []string{"ack", "sorted", "windowed"} {
		t.Run(kind, func(t *testing.T) {
			points := gapPoints
			if kind != "ack" {
				points = sortedGapPoints
			}
			base := scratchDir(t)
			defer os.RemoveAll(base)
			_, err := checkCrashPoints(base, len(points), 0, gapCount(0), func(scratch string, n int) (gapCount, error) {
				defer os.RemoveAll(scratch)
				return 1, checkGap(t.Name(), filepath.Join(scratch, "q"), kind, points[n-1])
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// gapCount counts the crash points checked.
type gapCount int

func (c gapCount) add(o gapCount) gapCount { return c + o }

// gapReport is what the parent learns from a child's report lines.
type gapReport struct {
	o       *fuzz.Oracle
	live    map[string]bool // enqueued, not acked, not dead-lettered
	dead    map[string]bool // dead-lettered
	reached string          // the point the child reported ("" if none)
	segs    []string        // the log's segment files when the compaction began ("f" lines)
	fails   []string        // "!" lines
}

// apply feeds one report line of a kill9gap child.
func (g *gapReport) apply(l string) {
	if len(l) < 2 {
		return
	}
	code, tok := l[0], l[2:]
	switch code {
	case 'e':
		g.o.Enqueued(tok)
		g.live[tok] = true
	case 'd':
		g.o.Delivered(tok)
	case 'K':
		g.o.AckAttempt(tok)
		g.o.Acked(tok)
		delete(g.live, tok)
	case 'R':
		g.o.Released(tok)
	case 'D':
		g.o.Released(tok)
		delete(g.live, tok)
		g.dead[tok] = true
	case 's':
		g.reached = tok
	case 'f':
		g.segs = append(g.segs, tok)
	case '!':
		g.fails = append(g.fails, tok)
	}
}

// checkGap runs one child of the test named testName that kills itself at
// p in a compaction of the queue of the given kind in dir, then checks the
// reopened queue. It runs on checkCrashPoints' workers, so it returns its
// failures instead of failing a test.
func checkGap(testName, dir, kind string, p gapPoint) error {
	what := fmt.Sprintf("%s queue killed at %s #%d", kind, p.name, p.at)
	g := &gapReport{o: fuzz.NewOracle(), live: make(map[string]bool), dead: make(map[string]bool)}
	c, err := launchChild(testName, childConfig{Mode: "kill9gap", Dir: dir, Sorted: kind, DieAt: p.name,
		Cycle: p.at, Lifetime: time.Minute})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	c.runFor(time.Minute, g.apply)
	switch {
	case len(g.fails) > 0:
		return fmt.Errorf("%s: the child saw: %s\nits output:\n%s", what, strings.Join(g.fails, "; "), c.output())
	case !c.killed() || g.reached != p.name:
		return fmt.Errorf("%s: the child never reached the point (reported %q, exit %v); its output:\n%s",
			what, g.reached, c.err, c.output())
	case c.raceReport() != "":
		return fmt.Errorf("%s: the race detector found a data race in the child:\n%s", what, c.raceReport())
	}
	if p.name == "truncated" {
		if err := checkFrontCut(dir, g.segs); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	d, dead, err := drainGap(dir, kind)
	if err != nil {
		return fmt.Errorf("%s: reopen: %w", what, err)
	}
	if err := sameTokens(d, g.live, kind == "ack"); err != nil {
		return fmt.Errorf("%s: the messages not acked: %w", what, err)
	}
	if err := sameTokens(dead, g.dead, kind == "ack"); err != nil {
		return fmt.Errorf("%s: the dead letters: %w", what, err)
	}
	if r := g.o.Recovered(append(d.tokens, dead.tokens...)); !r.OK() {
		return fmt.Errorf("%s: %s", what, r)
	}
	return nil
}

// sameTokens checks that d holds each token of want once, nothing else,
// each with the payload it was enqueued with and, when headers is set (an
// ack queue's messages; a sorted value has none), its headers.
func sameTokens(d drained, want map[string]bool, headers bool) error {
	if headers && len(d.headers) != len(d.tokens) {
		return fmt.Errorf("headers of %d of %d messages read", len(d.headers), len(d.tokens))
	}
	seen := make(map[string]bool, len(d.tokens))
	for i, tok := range d.tokens {
		switch {
		case !want[tok]:
			return fmt.Errorf("%q (payload %d bytes) is not one of the %d expected", tok, len(d.payloads[i]), len(want))
		case seen[tok]:
			return fmt.Errorf("%q came back twice", tok)
		case !bytes.Equal(d.payloads[i], gapPayload(tok)):
			return fmt.Errorf("%q came back with a wrong payload: %q", tok, d.payloads[i])
		case headers && !reflect.DeepEqual(d.headers[i], gapHeaders(tok)):
			return fmt.Errorf("%q came back with wrong headers: %q", tok, d.headers[i])
		}
		seen[tok] = true
	}
	for tok := range want {
		if !seen[tok] {
			return fmt.Errorf("%q is missing (%d of %d came back)", tok, len(seen), len(want))
		}
	}
	return nil
}

// gapPayload is the payload of the message carrying tok: its length
// depends on the token, so a payload read from another message's record
// differs.
func gapPayload(tok string) []byte {
	n := 0
	for _, b := range []byte(tok) {
		n = n*31 + int(b)
	}
	return payload(tok, 40+n%120)
}

// gapHeaders are the headers of the ack-queue message carrying tok: keys
// and values whose lengths depend on the token, so that headers read from
// another message's record, or cut, differ.
func gapHeaders(tok string) map[string]string {
	n := len(gapPayload(tok))
	return map[string]string{"tok": tok, "pad": strings.Repeat("h", n%23), strings.Repeat("k", 1+n%5): fmt.Sprint(n)}
}

// checkFrontCut checks, after a kill at "truncated", that the front
// truncation removed from the log folder of the queue in dir every segment
// that held something when the compaction began (before, oldest first)
// but the newest, which holds the last record then: a compaction copies
// forward every live message below the start of that segment (its target
// when the never-delivered messages are few, as the workload's are:
// moveTargetLocked), and the copies made the originals dead. It assumes
// that newest segment holds a record, not only a witness (which the wal
// writes on a Flush or after an idle spell; the workload does neither
// before the compaction).
func checkFrontCut(dir string, before []string) error {
	if len(before) < 2 {
		return fmt.Errorf("the log held %d segments when the compaction began; the workload must fill more", len(before))
	}
	after, err := logSegments(dir)
	if err != nil {
		return err
	}
	for _, s := range after {
		if s < before[len(before)-1] {
			return fmt.Errorf("segment %s is still there after the front truncation (before the compaction: %s; after: %s)",
				s, strings.Join(before, " "), strings.Join(after, " "))
		}
	}
	return nil
}

// logSegments returns the names of the log segment files of the queue in
// dir, oldest first.
func logSegments(dir string) ([]string, error) {
	des, err := os.ReadDir(filepath.Join(dir, "log"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, de := range des {
		if isSegment(filepath.Join("log", de.Name())) {
			out = append(out, de.Name())
		}
	}
	return out, nil // ReadDir sorts by name; the names are zero-padded indexes
}

// drainGap opens the queue of the given kind in dir as its application
// reopens it and returns its ready and leased messages (leases ended) and
// its dead letters, apart.
func drainGap(dir, kind string) (live, dead drained, err error) {
	o := drainOptionsAs(gapSegment)
	switch kind {
	case "ack":
		return drainGapAck(dir, o)
	case "sorted":
		s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: o})
		if err != nil {
			return live, dead, err
		}
		return drainGapSorted(s)
	default:
		w, err := queue.OpenWindowed(dir, &queue.WindowOptions{SortedOptions: queue.SortedOptions{Options: o}, Window: gapWindow})
		if err != nil {
			return live, dead, err
		}
		return drainGapSorted(w.Sorted)
	}
}

// gapWindow is the windowed queue's Window: a key is due at once.
const gapWindow = time.Nanosecond

// drainGapAck is drainGap for an ack queue.
func drainGapAck(dir string, o queue.Options) (live, dead drained, err error) {
	q, err := queue.Open(dir, &o)
	if err != nil {
		return live, dead, err
	}
	defer func() { err = errors.Join(err, q.Close()) }()
	ds, err := q.DeadLetters(0, 0)
	if err != nil {
		return live, dead, err
	}
	for _, dl := range ds {
		dead.tokens, dead.payloads = append(dead.tokens, tokenOf(dl.Payload)), append(dead.payloads, dl.Payload)
		dead.headers = append(dead.headers, dl.Headers)
	}
	if _, err := q.RequeueExpired(); err != nil {
		return live, dead, err
	}
	for {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			return live, dead, nil
		}
		if err != nil {
			return live, dead, err
		}
		live.tokens, live.payloads = append(live.tokens, tokenOf(m.Payload)), append(live.payloads, m.Payload)
		live.headers = append(live.headers, m.Headers)
	}
}

// drainGapSorted is drainGap for a sorted or windowed queue.
func drainGapSorted[K queue.SortKey](s *queue.Sorted[K]) (live, dead drained, err error) {
	defer func() { err = errors.Join(err, s.Close()) }()
	ds, err := s.DeadValues(0, 0)
	if err != nil {
		return live, dead, err
	}
	for _, dv := range ds {
		dead.tokens, dead.payloads = append(dead.tokens, tokenOf(dv.Payload)), append(dead.payloads, dv.Payload)
	}
	if _, err := s.RequeueExpired(); err != nil {
		return live, dead, err
	}
	for {
		bs, err := s.TryPull(1024)
		if errors.Is(err, queue.ErrEmpty) {
			return live, dead, nil
		}
		if err != nil {
			return live, dead, err
		}
		for _, b := range bs {
			for _, v := range b.Values {
				live.tokens, live.payloads = append(live.tokens, tokenOf(v.Payload)), append(live.payloads, v.Payload)
			}
		}
	}
}

// gapChild is the child side of TestKill9CompactionGaps.
type gapChild struct {
	cfg   *childConfig
	rep   *reporter
	flush func() error // makes what the queue's log holds durable
	seen  int          // times the point was reached
	moved bool         // the compaction's copies are durable ("flushed" reached)
}

// runGapChild builds the queue, compacts it, and reports 'n' and exits if
// the compaction never reached the point.
func runGapChild(cfg *childConfig) {
	c := &gapChild{cfg: cfg, rep: newReporter()}
	opts := queue.Options{Sync: queue.SyncNever, SegmentSize: gapSegment, SnapshotBytes: 1 << 30,
		AckTimeout: time.Hour, ManualRequeue: true}
	testhook.SetManualCompaction(&opts)
	testhook.SetCompactStep(&opts, c.compactStep)
	testhook.SetSnapshotStep(&opts, func(step string) {
		if c.moved {
			c.point("snap-" + step)
		}
	})
	var err error
	switch cfg.Sorted {
	case "ack":
		err = c.ackWorkload(opts)
	case "sorted":
		var s *queue.Sorted[int64]
		if s, err = queue.OpenSorted[int64](cfg.Dir, &queue.SortedOptions{Options: opts}); err == nil {
			err = sortedWorkload(c, s, func(i int, key string, p []byte) error {
				return s.Publish(context.Background(), int64(i), key, p)
			})
		}
	default:
		var w *queue.Windowed
		if w, err = queue.OpenWindowed(cfg.Dir, &queue.WindowOptions{SortedOptions: queue.SortedOptions{Options: opts}, Window: gapWindow}); err == nil {
			err = sortedWorkload(c, w.Sorted, func(_ int, key string, p []byte) error {
				return w.Publish(context.Background(), key, p)
			})
		}
	}
	if err != nil {
		c.rep.failf("%v", err)
	}
	c.rep.line('n', "compacted without reaching the point")
	os.Exit(0)
}

// compactStep is the compaction hook. A compaction snapshots before its
// copies too, and that snapshot's front truncation (which finds every
// original live and cuts nothing) reaches "truncated" first: the point
// aimed at is the truncation after the copies, so it counts only once
// they are durable.
func (c *gapChild) compactStep(name string) {
	if name == "flushed" {
		c.moved = true
	}
	if name == "truncated" && !c.moved {
		return
	}
	c.point(name)
}

// point kills the child at the point it was told. Before the compaction
// made its copies durable ("flushed"), it first makes what the log holds
// durable, as the log's group commit may do at any time; from then on it
// adds nothing to what the engine wrote.
func (c *gapChild) point(name string) {
	if name != c.cfg.DieAt {
		return
	}
	if c.seen++; c.seen < c.cfg.Cycle {
		return
	}
	if !c.moved {
		if err := c.flush(); err != nil {
			c.rep.failf("flush at %s: %v", name, err)
		}
	}
	c.rep.line('s', name)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// reportSegments reports the log's segment files that hold something,
// oldest first ("f" lines), as the compaction is about to begin. It
// leaves out an empty one: a roll that fills a segment exactly opens the
// next one empty, and the last record is then in the one before it.
func (c *gapChild) reportSegments() error {
	segs, err := logSegments(c.cfg.Dir)
	if err != nil {
		return fmt.Errorf("segments before the compaction: %w", err)
	}
	var held []string
	for _, s := range segs {
		fi, err := os.Stat(filepath.Join(c.cfg.Dir, "log", s))
		if err != nil {
			return fmt.Errorf("segments before the compaction: %w", err)
		}
		if fi.Size() > 0 {
			held = append(held, s)
		}
	}
	c.rep.line('f', held...)
	return nil
}

// ackWorkload builds the ack queue's state and compacts it: acked,
// dead-lettered, nacked, leased and delayed messages in the first
// segments, never-delivered ones after them, and a long log of extends.
func (c *gapChild) ackWorkload(opts queue.Options) error {
	q, err := queue.Open(c.cfg.Dir, &opts)
	if err != nil {
		return err
	}
	c.flush = func() error { return testhook.FlushLog(q) }
	ctx := context.Background()
	enqueue := func(tok string, o ...queue.EnqueueOption) error {
		if _, err := q.Enqueue(ctx, gapPayload(tok), append(o, queue.WithHeaders(gapHeaders(tok)))...); err != nil {
			return err
		}
		c.rep.line('e', tok)
		return nil
	}
	for i := range 30 {
		if err := enqueue(fmt.Sprintf("G%d", i)); err != nil {
			return err
		}
	}
	for i := range 3 {
		if err := enqueue(fmt.Sprintf("W%d", i), queue.WithDelay(time.Hour)); err != nil {
			return err
		}
	}
	var held *queue.Message
	for j := range 12 {
		m, err := q.TryDequeue()
		if err != nil {
			return err
		}
		tok := tokenOf(m.Payload)
		c.rep.line('d', tok)
		switch j % 4 {
		case 0:
			err = m.Ack()
			c.rep.line('K', tok)
		case 1:
			err = m.DeadLetter("gap test")
			c.rep.line('D', tok)
		case 2:
			err = m.Nack(0)
			c.rep.line('R', tok)
		default:
			held = m
		}
		if err != nil {
			return err
		}
	}
	for i := range 20 {
		if err := enqueue(fmt.Sprintf("N%d", i)); err != nil {
			return err
		}
	}
	for range 800 {
		if err := held.Extend(time.Hour); err != nil {
			return err
		}
	}
	if err := c.reportSegments(); err != nil {
		return err
	}
	return q.Compact()
}

// sortedWorkload is ackWorkload for a sorted or windowed queue s: values
// on five keys, batches acked, dead-lettered, nacked and held, more values
// after them, and a long log of extends. publish publishes the i-th value.
func sortedWorkload[K queue.SortKey](c *gapChild, s *queue.Sorted[K], publish func(i int, key string, p []byte) error) error {
	c.flush = func() error { return testhook.FlushLog(s) }
	pub := func(prefix string, from, n int) error {
		for i := from; i < from+n; i++ {
			tok := fmt.Sprintf("%s%d", prefix, i)
			if err := publish(i, fmt.Sprintf("k%d", i%5), gapPayload(tok)); err != nil {
				return err
			}
			c.rep.line('e', tok)
		}
		return nil
	}
	if err := pub("G", 0, 30); err != nil {
		return err
	}
	var held *queue.Batch[K]
	for j := range 5 {
		bs, err := s.TryPull(1)
		if err != nil {
			return err
		}
		b := bs[0]
		toks := make([]string, len(b.Values))
		for i, v := range b.Values {
			toks[i] = tokenOf(v.Payload)
		}
		c.rep.line('d', toks...)
		switch j % 4 {
		case 0:
			err = b.Ack()
			c.rep.line('K', toks...)
		case 1:
			err = b.DeadLetter("gap test")
			c.rep.line('D', toks...)
		case 2:
			err = b.Nack(0)
			c.rep.line('R', toks...)
		default:
			held = b
		}
		if err != nil {
			return err
		}
	}
	if err := pub("N", 30, 20); err != nil {
		return err
	}
	for range 800 {
		if err := held.Extend(time.Hour); err != nil {
			return err
		}
	}
	if err := c.reportSegments(); err != nil {
		return err
	}
	return s.Compact()
}
