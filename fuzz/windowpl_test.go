package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/queue"
)

// TestWindowedDueAfterPowerLoss runs a windowed queue (SingleFlight, 4 KiB
// segments, compactions) on a crash file system under SyncAlways: values
// published to a few keys on a clock that moves, batches pulled, acked,
// extended and nacked with delays. It crashes the run at every durable
// operation and opens several power-loss states of each at the crash's
// time, then checks when each key comes back:
//
//   - a batch pulled at the crash's time holds values whose window has
//     passed (its oldest value published Window before, at least), each
//     with the publish time its Publish was given, and never a key whose
//     nack (returned) holds it past that time;
//   - every key whose window passed and that no nack holds is pulled then,
//     with every value whose Publish returned and no ack did;
//   - once the clock has moved a day on, every such value comes back, and
//     none whose batch's Ack returned.
//
// Long run: WALQ_WINDOW_RUNS=200 go test ./fuzz -run '^TestWindowedDueAfterPowerLoss$' -timeout 1h -v
func TestWindowedDueAfterPowerLoss(t *testing.T) {
	runs := envInt(t, "WALQ_WINDOW_RUNS", scaled(4, 2))
	perPoint := envInt(t, "WALQ_WINDOW_STATES", 6)
	_, seed := testRand(t)
	points, states := 0, 0
	for r := range runs {
		base := scratchDir(t)
		dry, err := wdRun(filepath.Join(base, "dry"), seed+uint64(r), 0)
		if err != nil {
			t.Fatal(err)
		}
		if dry.violation != "" {
			t.Fatalf("workload seed %d without a crash: %s", seed+uint64(r), dry.violation)
		}
		for n := 1; n <= dry.durable+1; n++ {
			k, err := wdCheckPoint(filepath.Join(base, fmt.Sprint(n)), seed+uint64(r), n, perPoint)
			if err != nil {
				t.Fatalf("workload seed %d, crash at durable operation %d: %v\n(replay: WALQ_SEED=%d)", seed+uint64(r), n, err, seed)
			}
			points, states = points+1, states+k
		}
	}
	t.Logf("SUMMARY windowed-due-powerloss: runs=%d crash-points=%d states=%d", runs, points, states)
}

// wdWindow is the queue's window; wdKeys the keys published to.
const (
	wdWindow = 5 * time.Second
	wdKeys   = 4
	wdOps    = 90
)

// wdValue is the model of one published value.
type wdValue struct {
	key      string
	at       time.Time // the publish time the queue was given
	pubSure  bool      // its Publish returned
	ackSure  bool      // its batch's Ack returned
	ackMaybe bool      // an Ack of its batch started (it may have taken)
}

// wdKey is the model of one key's hold.
type wdKey struct {
	hold      time.Time // a nack that returned holds the key until then
	holdMaybe bool      // a nack whose outcome the crash left open, or values published since a nack
	leased    time.Time // the lease of its batch runs out then (zero: none)
}

// wdHeld is a batch the workload holds.
type wdHeld struct {
	b    *queue.Batch[time.Time]
	toks []string
}

// wdCrashRun is one run of the workload.
type wdCrashRun struct {
	fsys      *crashfs.FS
	clock     *fakeclock.Clock
	vals      map[string]*wdValue
	keys      map[string]*wdKey
	durable   int
	closed    bool   // the run reached its Close, which may keep the leases
	violation string // the first thing the running queue did wrong
}

func wdOptions(clock queue.Clock, fsys *crashfs.FS) *queue.WindowOptions {
	return &queue.WindowOptions{Window: wdWindow, SortedOptions: queue.SortedOptions{SingleFlight: true,
		Options: queue.Options{Sync: queue.SyncAlways, SegmentSize: 4096, SnapshotBytes: 6000, ManualRequeue: true,
			MaxDeliveries: -1, AckTimeout: 4 * time.Second, Clock: clock, FS: fsys}}}
}

// wdRun runs the workload in root crashing at durable operation crashAt
// (0: never).
func wdRun(root string, seed uint64, crashAt int) (*wdCrashRun, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	fsys, err := crashfs.New(root, crashAt)
	if err != nil {
		return nil, err
	}
	run := &wdCrashRun{fsys: fsys, clock: newManualClock(), vals: make(map[string]*wdValue), keys: make(map[string]*wdKey)}
	for k := range wdKeys {
		run.keys[fmt.Sprint("k", k)] = &wdKey{}
	}
	w, err := queue.OpenWindowed(filepath.Join(root, "q"), wdOptions(run.clock, fsys))
	if err == nil {
		err = run.steps(w, rand.New(rand.NewPCG(seed, 31)))
		run.closed = err == nil // the run reached Close: the leases may be kept
		if cerr := w.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil && !fsys.Crashed() {
		return nil, fmt.Errorf("failed without a crash: %w", err)
	}
	if err := fsys.Image(); err != nil {
		return nil, err
	}
	run.durable, _ = fsys.Ops()
	return run, nil
}

func (run *wdCrashRun) violate(format string, args ...any) {
	if run.violation == "" {
		run.violation = fmt.Sprintf(format, args...)
	}
}

// steps makes the workload's calls until one fails (the crash).
func (run *wdCrashRun) steps(w *queue.Windowed, rng *rand.Rand) error {
	var held []wdHeld
	for i := range wdOps {
		var err error
		now := run.clock.Now()
		switch r := rng.IntN(100); {
		case r < 35:
			tok, key := fmt.Sprintf("W%d", i), fmt.Sprint("k", rng.IntN(wdKeys))
			run.vals[tok] = &wdValue{key: key, at: now}
			if k := run.keys[key]; k.hold.After(now) {
				k.holdMaybe = true // what a hold means for values published after it is not judged here
			}
			err = w.Publish(context.Background(), key, payload(tok, 50+rng.IntN(300)))
			run.vals[tok].pubSure = err == nil
		case r < 55:
			var bs []*queue.Batch[time.Time]
			bs, err = w.TryPull(2)
			if errors.Is(err, queue.ErrEmpty) {
				err = nil
			}
			for _, b := range bs {
				toks := run.checkBatch(b, now, "while running")
				held = append(held, wdHeld{b: b, toks: toks})
				run.keys[b.Key].leased = now.Add(4 * time.Second)
			}
		case r < 75 && len(held) > 0:
			k := rng.IntN(len(held))
			h := held[k]
			held = append(held[:k], held[k+1:]...)
			err = run.settle(h, rng, now, &held)
		case r < 80:
			err = w.Compact()
		case r < 92:
			run.clock.Advance(time.Duration(1+rng.IntN(3)) * time.Second)
		default:
			_, err = w.RequeueExpired()
			held = nil // their leases may have ended; a later settle would be refused
			for _, k := range run.keys {
				if !k.leased.After(now) {
					k.leased = time.Time{}
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// settle acks, nacks with a delay or extends a held batch.
func (run *wdCrashRun) settle(h wdHeld, rng *rand.Rand, now time.Time, held *[]wdHeld) error {
	key := run.keys[h.b.Key]
	var err error
	switch r := rng.IntN(10); {
	case r < 5:
		for _, tok := range h.toks {
			run.vals[tok].ackMaybe = true
		}
		err = h.b.Ack()
		for _, tok := range h.toks {
			run.vals[tok].ackSure = err == nil
		}
		if err == nil {
			key.leased = time.Time{}
		}
	case r < 8:
		d := time.Duration(rng.IntN(3)) * 4 * time.Second
		if err = h.b.Nack(d); !errors.Is(err, queue.ErrLeaseLost) {
			key.hold, key.holdMaybe, key.leased = now.Add(d), err != nil, time.Time{}
		}
	default:
		d := time.Duration(2+rng.IntN(6)) * time.Second
		if err = h.b.Extend(d); err == nil {
			key.leased = now.Add(d)
		}
		*held = append(*held, h)
	}
	if errors.Is(err, queue.ErrLeaseLost) {
		return nil // the lease ran out by the clock: the values went back
	}
	return err
}

// checkBatch checks a batch pulled at now: its values' publish times, its
// window, and no nack holding its key; it returns the values' tokens.
func (run *wdCrashRun) checkBatch(b *queue.Batch[time.Time], now time.Time, when string) []string {
	var toks []string
	oldest := now
	for _, v := range b.Values {
		tok := tokenOf(v.Payload)
		m := run.vals[tok]
		switch {
		case m == nil || m.key != b.Key:
			run.violate("%s: %q pulled under key %s, never published there", when, tok, b.Key)
			continue
		case !v.PublishedAt.Equal(m.at):
			run.violate("%s: %s pulled with publish time %v, published at %v", when, tok, v.PublishedAt, m.at)
		case m.ackSure:
			run.violate("%s: %s pulled after its batch's Ack returned", when, tok)
		}
		if m.at.Before(oldest) {
			oldest = m.at
		}
		toks = append(toks, tok)
	}
	if oldest.Add(wdWindow).After(now) {
		run.violate("%s: key %s pulled at %v, its oldest value published at %v: before its window passed", when, b.Key, now, oldest)
	}
	if k := run.keys[b.Key]; !k.holdMaybe && k.hold.After(now) {
		run.violate("%s: key %s pulled at %v, a nack holds it until %v", when, b.Key, now, k.hold)
	}
	return toks
}

// wdCheckPoint runs the workload crashing at durable operation n and
// checks perPoint power-loss states of the crash; it returns how many.
func wdCheckPoint(root string, seed uint64, n, perPoint int) (int, error) {
	defer os.RemoveAll(root)
	run, err := wdRun(filepath.Join(root, "run"), seed, n)
	if err != nil {
		return 0, err
	}
	if run.violation != "" {
		return 0, fmt.Errorf("while running: %s", run.violation)
	}
	for v := range perPoint {
		dst := filepath.Join(root, fmt.Sprint("state-", v))
		st, err := run.fsys.Materialize(dst, rand.New(rand.NewPCG(seed, uint64(n)<<20|uint64(v))))
		if err != nil {
			return v, err
		}
		excused := st.MayRefuse(dst) || reordered(st)
		err = run.observe(filepath.Join(dst, "q"))
		os.RemoveAll(dst)
		if errors.Is(err, queue.ErrCorrupt) && excused {
			continue
		}
		if err != nil {
			return v, fmt.Errorf("state %d (%s): %w", v, st.Desc, err)
		}
	}
	return perPoint, nil
}

// observe opens a recovered state at the crash's time, pulls what is due,
// then everything a day later, and judges both.
func (run *wdCrashRun) observe(dir string) error {
	clock := newManualClock()
	now := run.clock.Now()
	clock.Advance(now.Sub(clock.Now()))
	o := wdOptions(clock, nil)
	o.Sync, o.AckTimeout, o.SnapshotBytes = queue.SyncNever, time.Hour, 1<<30
	o.FS = nil
	w, err := queue.OpenWindowed(dir, o)
	if err != nil {
		return err
	}
	defer w.Close()
	run.violation = ""
	if _, err := w.RequeueExpired(); err != nil { // leases a clean Close kept that ran out
		return err
	}
	first, err := run.drain(w, now, "at the crash's time")
	if err != nil {
		return err
	}
	if err := run.checkDue(first, now); err != nil {
		return err
	}
	clock.Advance(24 * time.Hour)
	if _, err := w.RequeueExpired(); err != nil {
		return err
	}
	later, err := run.drain(w, clock.Now(), "a day later")
	if err != nil {
		return err
	}
	for tok := range first {
		later[tok] = true
	}
	for tok, m := range run.vals {
		if m.pubSure && !m.ackMaybe && !later[tok] {
			return fmt.Errorf("%s (key %s, published at %v) lost", tok, m.key, m.at)
		}
	}
	return nil
}

// drain pulls and acks every batch due at now; it returns the tokens.
func (run *wdCrashRun) drain(w *queue.Windowed, now time.Time, when string) (map[string]bool, error) {
	got := make(map[string]bool)
	for {
		bs, err := w.TryPull(16)
		if errors.Is(err, queue.ErrEmpty) {
			return got, nil
		}
		if err != nil {
			return nil, err
		}
		for _, b := range bs {
			for _, tok := range run.checkBatch(b, now, when) {
				if got[tok] {
					return nil, fmt.Errorf("%s: %s pulled twice", when, tok)
				}
				got[tok] = true
			}
			if err := b.Ack(); err != nil {
				return nil, err
			}
		}
		if run.violation != "" {
			return nil, errors.New(run.violation)
		}
	}
}

// checkDue checks that every value due at now, in a key no nack holds,
// was pulled at now.
func (run *wdCrashRun) checkDue(got map[string]bool, now time.Time) error {
	for tok, m := range run.vals {
		k := run.keys[m.key]
		held := k.holdMaybe || k.hold.After(now) || run.closed && k.leased.After(now)
		if m.pubSure && !m.ackMaybe && !held && !m.at.Add(wdWindow).After(now) && !got[tok] {
			return fmt.Errorf("%s (key %s, published at %v) not pulled at %v, its window passed", tok, m.key, m.at, now)
		}
	}
	return nil
}
