package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/walq/walq/internal/fakeclock"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestSnapshotStepCrash crashes a queue at every step of every snapshot of
// several compactions, and at every step of the log truncation after them,
// and checks that the recovered state equals the state before the
// compaction: counts, dead letters, and every message in delivery order
// with its delivery count.
//
// The crash points are the snapshot's own hook (testhook.SetSnapshotStep): at
// each step the directory is copied, which is what a kill -9 there leaves.
// The truncation (walq's TruncateFront: NAME.FRONT created, older
// segments removed, the marker removed; and the one an older walq left,
// tidwall/wal's: NAME.START.TEMP written, renamed to NAME.START, older
// segments removed, NAME.START renamed to NAME) has no hook, so its
// intermediate states are built from the copies before and after it. Power-loss variants: the temporary snapshot cut
// short (not fsynced), the rename undone (directory not fsynced yet), the
// old snapshot back (its removal not fsynced).
//
// The two queues, each with its own directory, clock and generator, run
// side by side: most of a run is waiting for the directory to settle
// before and after each compaction (quietDir), which takes no core.
func TestSnapshotStepCrash(t *testing.T) {
	for _, sorted := range []bool{false, true} {
		name := map[bool]string{false: "ack queue", true: "sorted queue"}[sorted]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rng, _ := testRand(t)
			s := &stepRun{t: t, rng: rng, dir: scratchDir(t), clock: newManualClock(), sorted: sorted}
			s.run()
			t.Logf("SUMMARY snapshot-steps %s: compactions=%d crash states=%d (steps %v, truncation states %d, power-loss variants %d), all equal to the model",
				name, s.compactions, s.states, s.steps, s.truncations, s.variants)
		})
	}
}

// stepRun is one run of TestSnapshotStepCrash.
type stepRun struct {
	t      *testing.T
	rng    *rand.Rand
	dir    string
	clock  *fakeclock.Clock
	sorted bool
	q      *queue.Queue
	s      *queue.Sorted[int64]
	n      int // tokens made

	// mu guards captured and recording: the hook also runs on the queue's
	// background compactions, on their own goroutine.
	mu        sync.Mutex
	captured  []stepImage // images taken by the hook during the current compaction
	recording bool        // a checked compaction is running: the hook captures

	compactions, states, truncations, variants int
	steps                                      map[string]int
}

// stepImage is a copy of the directory at one crash point.
type stepImage struct {
	name  string
	step  string
	files map[string][]byte
}

func (s *stepRun) opts() queue.Options {
	o := queue.Options{SegmentSize: 4096, ManualRequeue: true, MaxDeliveries: 3, Clock: s.clock,
		SnapshotBytes: 1 << 30, AckTimeout: time.Minute}
	testhook.SetSnapshotStep(&o, s.hook)
	// Only the checked compactions compact: a background pass would take
	// the truncations they are to crash in.
	testhook.SetManualCompaction(&o)
	return o
}

// hook copies the directory at a snapshot step.
func (s *stepRun) hook(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.recording {
		return // a background compaction, not the one being checked
	}
	files, err := readDir(s.dir)
	if err != nil {
		s.t.Errorf("copy at %s: %v", step, err)
		return
	}
	s.captured = append(s.captured, stepImage{name: fmt.Sprintf("snapshot %d, step %s", countStep(s.captured, "written"), step),
		step: step, files: files})
}

func countStep(imgs []stepImage, step string) int {
	n := 0
	for _, im := range imgs {
		if im.step == step {
			n++
		}
	}
	return n
}

func (s *stepRun) run() {
	t := s.t
	s.steps = make(map[string]int)
	o := s.opts()
	var err error
	if s.sorted {
		s.s, err = queue.OpenSorted[int64](s.dir, &queue.SortedOptions{Options: o})
	} else {
		s.q, err = queue.Open(s.dir, &o)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	// Go on until one of the checked compactions truncated (the queue
	// runs no background compaction here).
	truncated := false
	for round := 0; round < 12 || !truncated; round++ {
		if round == 100 {
			t.Fatalf("no checked compaction truncated the log in %d rounds: the truncation states were not exercised", round)
		}
		s.workload(round)
		truncated = s.compactAndCheck() || truncated
	}
}

func (s *stepRun) close() {
	if s.q != nil {
		s.q.Close()
	}
	if s.s != nil {
		s.s.Close()
	}
}

// workload changes the queue: the first round is consumed entirely (so
// that its segments can go), later ones leave leased, delayed, nacked,
// dead and pending messages behind.
func (s *stepRun) workload(round int) {
	if round%2 == 0 {
		s.clear()
	}
	if s.sorted {
		s.sortedWorkload(round)
		return
	}
	t, q, ctx := s.t, s.q, context.Background()
	for i := 0; i < 40+20*round; i++ {
		s.n++
		tok := fmt.Sprintf("Q%d", s.n)
		var opts []queue.EnqueueOption
		switch i % 7 {
		case 1:
			opts = append(opts, queue.WithDelay(time.Duration(1+i%3)*time.Second))
		case 2:
			opts = append(opts, queue.WithID(tok), queue.WithHeaders(map[string]string{"round": fmt.Sprint(round)}))
		}
		if _, err := q.Enqueue(ctx, payload(tok, 60+s.rng.IntN(120)), opts...); err != nil {
			t.Fatal(err)
		}
	}
	s.clock.Advance(4 * time.Second)
	for i := 0; ; i++ {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) || (round > 0 && i == 25) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case round == 0 || i%5 < 2:
			err = m.Ack()
		case i%5 == 2:
			err = m.Nack(time.Duration(i%2) * 10 * time.Second)
		case i%10 == 3:
			err = m.DeadLetter("step test")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// clear ends every lease, requeues the dead letters and acks everything,
// so that the next compaction can truncate the whole log behind it.
func (s *stepRun) clear() {
	t := s.t
	s.clock.Advance(2 * time.Minute)
	if s.sorted {
		if _, err := s.s.RequeueExpired(); err != nil {
			t.Fatal(err)
		}
		s.clock.Advance(time.Minute) // holds of nacked batches
		for {
			bs, err := s.s.TryPull(100)
			if errors.Is(err, queue.ErrEmpty) {
				return
			}
			for _, b := range bs {
				if err == nil {
					err = b.Ack()
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.q.RequeueExpired(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.q.RequeueAllDead(); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(time.Minute) // delays and nack delays
	for {
		m, err := s.q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			return
		}
		if err == nil {
			err = m.Ack()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// sortedWorkload publishes values under a few keys, pulls some batches
// and acks, nacks (with a hold) or keeps them.
func (s *stepRun) sortedWorkload(round int) {
	t, sq, ctx := s.t, s.s, context.Background()
	for i := 0; i < 40+20*round; i++ {
		s.n++
		tok := fmt.Sprintf("W%d", s.n)
		if err := sq.Publish(ctx, s.rng.Int64N(100), fmt.Sprintf("k%d", i%9), payload(tok, 60+s.rng.IntN(120))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; ; i++ {
		bs, err := sq.TryPull(5)
		if errors.Is(err, queue.ErrEmpty) || (round > 0 && i == 6) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for j, b := range bs {
			switch {
			case round == 0 || (i+j)%3 == 0:
				err = b.Ack()
			case (i+j)%3 == 1:
				err = b.Nack(time.Duration(j) * time.Second)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// setRecording turns the hook's captures on (clearing the last ones) or
// off.
func (s *stepRun) setRecording(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.captured = nil
	}
	s.recording = on
}

// compactAndCheck compacts with the hook on, builds every crash state of
// the compaction, and compares each with the state before it. It reports
// whether the compaction truncated the log.
func (s *stepRun) compactAndCheck() bool {
	t := s.t
	before, err := quietDir(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	want := s.fingerprintOf(stepImage{name: "before the compaction", files: before})
	s.setRecording(true)
	if s.sorted {
		err = s.s.Compact()
	} else {
		err = s.q.Compact()
	}
	s.setRecording(false)
	if err != nil {
		t.Fatal(err)
	}
	after, err := quietDir(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	s.compactions++
	imgs := append(slices.Clone(s.captured), stepImage{name: "after the compaction", step: "after", files: after})
	imgs = append(imgs, s.powerLossVariants(before)...)
	trunc := s.truncationStates(after)
	imgs = append(imgs, trunc...)
	for _, im := range imgs {
		if got := s.fingerprintOf(im); got != want {
			t.Fatalf("compaction %d, crash %s: recovered state differs from the state before the compaction\n got: %s\nwant: %s",
				s.compactions, im.name, got, want)
		}
		s.states++
		s.steps[im.step]++
	}
	return len(trunc) > 0
}

// powerLossVariants returns what a power loss at the captured steps can
// leave besides what a kill -9 leaves.
func (s *stepRun) powerLossVariants(before map[string][]byte) []stepImage {
	var out []stepImage
	for _, im := range s.captured {
		snaps := snapshotFiles(im.files)
		switch im.step {
		case "written":
			for p, b := range im.files {
				if strings.HasSuffix(p, ".snap.tmp") {
					v := cloneFiles(im.files)
					v[p] = b[:s.rng.IntN(len(b)+1)]
					out = append(out, stepImage{name: im.name + ", temporary file cut short", step: "written/torn", files: v})
				}
			}
		case "renamed":
			if len(snaps) > 0 {
				v := cloneFiles(im.files)
				newest := snaps[len(snaps)-1]
				v[newest+".tmp"] = v[newest]
				delete(v, newest)
				out = append(out, stepImage{name: im.name + ", rename undone", step: "renamed/undone", files: v})
			}
		case "removed":
			v := cloneFiles(im.files)
			for _, old := range snapshotFiles(before) {
				v[old] = before[old]
			}
			out = append(out, stepImage{name: im.name + ", old snapshot back", step: "removed/undone", files: v})
		}
	}
	s.variants += len(out)
	return out
}

// truncationStates builds the states inside the log truncation that
// follows each snapshot: from the copy at the step "removed" (before
// TruncateFront) to the state after it, whose first segment N is the one
// tidwall/wal copied to N.START.
func (s *stepRun) truncationStates(after map[string][]byte) []stepImage {
	var out []stepImage
	for i, im := range s.captured {
		if im.step != "removed" {
			continue
		}
		next := after // the state after the truncation: the next capture, or the end
		if i+1 < len(s.captured) {
			next = s.captured[i+1].files
		}
		out = append(out, truncationStates(im, next)...)
	}
	s.truncations += len(out)
	return out
}

func truncationStates(pre stepImage, post map[string][]byte) []stepImage {
	segs, postSegs := segmentFiles(pre.files), segmentFiles(post)
	if len(postSegs) == 0 || len(segs) == 0 || postSegs[0] == segs[0] {
		return nil // nothing was truncated
	}
	if a, b := snapshotFiles(pre.files), snapshotFiles(post); len(a) == 0 || len(b) == 0 || a[len(a)-1] != b[len(b)-1] {
		return nil // a later snapshot came in between: the truncation is not this one's
	}
	n := postSegs[0]
	j := slices.Index(segs, n)
	if j < 0 {
		return nil
	}
	start := n + ".START"
	mk := func(what string, edit func(v map[string][]byte)) stepImage {
		v := cloneFiles(pre.files)
		edit(v)
		return stepImage{name: pre.name + ", truncation: " + what, step: "truncate", files: v}
	}
	out := []stepImage{
		mk("START.TEMP half written", func(v map[string][]byte) { v[start+".TEMP"] = pre.files[n][:len(pre.files[n])/2] }),
		mk("START written", func(v map[string][]byte) { v[start] = pre.files[n] }),
	}
	for i := 0; i <= j; i++ {
		out = append(out, mk(fmt.Sprintf("START written, %d of %d old segments removed", i+1, j+1), func(v map[string][]byte) {
			v[start] = pre.files[n]
			for _, old := range segs[:i+1] {
				delete(v, old)
			}
		}))
	}
	out = append(out, frontStates(segs[:j], n, mk)...)
	return append(out, mk("done", func(v map[string][]byte) {
		for _, old := range segs[:j] {
			delete(v, old)
		}
	}))
}

// frontStates builds the states inside walq's own TruncateFront, which
// keeps the segment n and removes the segments old before it: NAME.FRONT
// created for n (and the directory fsynced), the old segments removed in
// order, the directory fsynced, the marker removed. A kill -9 stops it
// after any removal; a power loss before the directory fsync keeps any
// subset of the removals, so the segments left can have a hole (only the
// newest old one gone, or every other one).
func frontStates(old []string, n string, mk func(string, func(map[string][]byte)) stepImage) []stepImage {
	front := n + ".FRONT"
	removed := func(what string, gone func(i int) bool) stepImage {
		return mk("FRONT written, "+what, func(v map[string][]byte) {
			v[front] = nil
			for i, p := range old {
				if gone(i) {
					delete(v, p)
				}
			}
		})
	}
	out := []stepImage{removed("no old segment removed", func(int) bool { return false })}
	for k := 1; k <= len(old); k++ {
		out = append(out, removed(fmt.Sprintf("%d of %d old segments removed", k, len(old)), func(i int) bool { return i < k }))
	}
	if len(old) > 1 {
		out = append(out,
			removed("only the newest old segment removed (power loss)", func(i int) bool { return i == len(old)-1 }),
			removed("every other old segment removed (power loss)", func(i int) bool { return i%2 == 1 }))
	}
	return out
}

func cloneFiles(m map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// fingerprintOf writes an image to a fresh directory, opens it and
// describes its state.
func (s *stepRun) fingerprintOf(im stepImage) string {
	s.t.Helper()
	dir := filepath.Join(scratchDir(s.t), "q")
	if err := writeDir(dir, im.files); err != nil {
		s.t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s.checkReadOnly(im, dir)
	var fp string
	var err error
	if s.sorted {
		fp, err = sortedFingerprint(dir)
	} else {
		fp, err = ackFingerprint(dir)
	}
	if err != nil {
		s.t.Fatalf("crash %s: %v", im.name, err)
	}
	return fp
}

// ackFingerprint opens a recovered ack queue and describes its whole
// state: counts, dead letters, and every message in delivery order with
// its delivery count and headers. Moved is left out: a compaction may copy
// messages forward without changing them.
func ackFingerprint(dir string) (string, error) {
	o := drainOptions()
	q, err := queue.Open(dir, &o)
	if err != nil {
		return "", err
	}
	defer q.Close()
	st := q.Stats()
	var b strings.Builder
	fmt.Fprintf(&b, "ready=%d delayed=%d inflight=%d dead=%d enqueued=%d delivered=%d acked=%d nacked=%d expired=%d dead-lettered=%d dedup=%d;",
		st.Ready, st.Delayed, st.InFlight, st.Dead, st.Enqueued, st.Delivered, st.Acked, st.Nacked, st.Expired, st.DeadLettered, st.DedupIDs)
	dl, err := q.DeadLetters(0, 1<<20)
	if err != nil {
		return "", err
	}
	for _, d := range dl {
		fmt.Fprintf(&b, " dead %s %q %d;", tokenOf(d.Payload), d.Reason, d.Deliveries)
	}
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	for q.Stats().Ready > 0 {
		ms, err := q.DequeueBatch(ctx, 4096)
		if err != nil {
			return "", err
		}
		for _, m := range ms {
			fmt.Fprintf(&b, " %s/%d%v", tokenOf(m.Payload), m.Deliveries, m.Headers)
		}
	}
	return b.String(), nil
}

// sortedFingerprint is ackFingerprint for a sorted queue: counts, then
// every batch in pull order with its values and delivery counts.
func sortedFingerprint(dir string) (string, error) {
	s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: drainOptions()})
	if err != nil {
		return "", err
	}
	defer s.Close()
	st := s.Stats()
	var b strings.Builder
	fmt.Fprintf(&b, "pending=%d keys=%d batches=%d leased=%d dead=%d published=%d pulled=%d acked=%d;",
		st.SortedPending, st.SortedKeys, st.SortedBatches, st.SortedLeased, st.SortedDead, st.Published, st.Pulled, st.BatchesAcked)
	for {
		bs, err := s.TryPull(1)
		if errors.Is(err, queue.ErrEmpty) {
			return b.String(), nil
		}
		if err != nil {
			return "", err
		}
		for _, bt := range bs {
			fmt.Fprintf(&b, " %s:", bt.Key)
			for _, v := range bt.Values {
				fmt.Fprintf(&b, " %s@%d/%d", tokenOf(v.Payload), v.Sort, v.Deliveries)
			}
			b.WriteString(";")
		}
	}
}

// checkReadOnly checks that a read-only Open and Verify of the crash
// image in dir, which Open recovers whole, open it and find nothing wrong
// but a torn tail: walq's own truncation marker, at every step, beside the
// snapshot it belongs to, is none from a later moment; and that neither
// changes a file.
func (s *stepRun) checkReadOnly(im stepImage, dir string) {
	s.t.Helper()
	o := drainOptions()
	o.ReadOnly = true
	var err error
	if s.sorted {
		var q *queue.Sorted[int64]
		if q, err = queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: o}); err == nil {
			q.Close()
		}
	} else {
		var q *queue.Queue
		if q, err = queue.Open(dir, &o); err == nil {
			q.Close()
		}
	}
	if err != nil {
		s.t.Fatalf("crash %s: read-only Open: %v", im.name, err)
	}
	if c, err := queue.Verify(dir, nil); err != nil || c.Front != "" {
		s.t.Fatalf("crash %s: Verify: %v (Front %q)", im.name, err, c.Front)
	}
	if after, err := readDir(dir); err != nil || !sameFiles(im.files, after) {
		s.t.Fatalf("crash %s: a read-only Open or Verify changed the directory (%v)", im.name, err)
	}
}
