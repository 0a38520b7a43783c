package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestSortedPowerLoss is TestPowerLoss for the sorted and windowed queues:
// publishes, pulls, batch acks, nacks (with and without delay), extends,
// dead-letters, requeues of the dead, lease expiry and compactions run on
// the crash file system with 4 KiB segments and automatic snapshots; the
// run loses power at every durable operation it reaches, and states a
// power loss can leave are opened with the real file system and drained.
//
// What the callers were told decides what each state must hold: under
// SyncAlways every call that returned nil counts, under SyncNever only what
// a Compact or Close that returned nil covered. A value whose Publish
// counts and no ack of which was attempted must come back (pending, leased
// or dead); a value whose batch Ack counts must not; every value that
// comes back was published, under its own key, sort key and payload, once,
// and each batch holds its key's values in sort order. A state with a hole
// or reordered writes may be refused with ErrCorrupt, never opened wrong.
func TestSortedPowerLoss(t *testing.T) {
	states := envInt(t, "WALQ_POWERLOSS_STATES", 3000)
	for _, c := range sortedModes {
		t.Run(c.name, func(t *testing.T) {
			_, seed := testRand(t)
			cfg := splConfig{mode: c.mode, windowed: c.windowed, seed: seed, states: scaled(states/3, 4)}
			n, refused, err := sortedPowerLoss(t, cfg)
			t.Logf("%d states checked, %d refused (hole or reordered)", n, refused)
			if err != nil {
				t.Fatalf("%v\n(replay: WALQ_SEED=%d)", err, seed)
			}
		})
	}
}

// sortedModes are the queues and sync modes TestSortedPowerLoss and
// TestSortedPowerLossDuringRecovery run their workload in, by subtest name.
var sortedModes = []struct {
	name     string
	mode     queue.SyncMode
	windowed bool
}{
	{"sorted-always", queue.SyncAlways, false},
	{"sorted-never", queue.SyncNever, false},
	{"windowed-always", queue.SyncAlways, true},
}

type splConfig struct {
	mode     queue.SyncMode
	windowed bool
	seed     uint64
	states   int
	serial   bool // one call at a time, no background compaction, settlesEach: the same crash points in every run
}

// splOps is the workload's length.
const splOps = 90

// splWindow is the windowed queue's window.
const splWindow = time.Second

// splOp is one call and its outcome.
type splOp struct {
	kind  string
	toks  []string // publish: the value; ack: the batch's values
	ok    bool     // returned nil
	tried bool     // it was called (ok or not)
}

// splValue is what a token was published as.
type splValue struct {
	key  string
	sort int64 // sorted queue only
	body string
}

// splRun is one run of the workload.
type splRun struct {
	fsys    *crashfs.FS
	ops     []splOp
	flushed int // ops[:flushed] were covered by a Compact or Close that returned nil
	values  map[string]splValue
	durable int
}

func sortedPowerLoss(t *testing.T, cfg splConfig) (int, int, error) {
	base := scratchDir(t)
	dry, err := runSortedWorkload(filepath.Join(base, "dry"), cfg, 0)
	if err != nil {
		return 0, 0, err
	}
	points := dry.durable + 1
	per := max(1, cfg.states/points)
	n, refused := 0, 0
	for p := 1; p <= points; p++ {
		root := filepath.Join(base, fmt.Sprint("run-", p))
		run, err := runSortedWorkload(root, cfg, p)
		if err != nil {
			return n, refused, err
		}
		for v := range per {
			dst := filepath.Join(base, fmt.Sprint("state-", p, "-", v))
			st, err := run.fsys.Materialize(dst, rand.New(rand.NewPCG(cfg.seed, uint64(p)<<20|uint64(v))))
			if err != nil {
				return n, refused, err
			}
			n++
			excused := st.MayRefuse(dst) || reordered(st)
			err = run.check(filepath.Join(dst, "q"), cfg)
			os.RemoveAll(dst)
			if err != nil && excused && errors.Is(err, queue.ErrCorrupt) {
				refused++
				continue
			}
			if err != nil {
				return n, refused, fmt.Errorf("crash at durable operation %d of %d, state %d (%s): %w", p, points, v, st.Desc, err)
			}
		}
		os.RemoveAll(root)
	}
	return n, refused, nil
}

// splQueue is what the workload needs of a sorted or windowed queue.
type splQueue struct {
	s        *queue.Sorted[int64]
	w        *queue.Windowed
	publish  func(key string, sort int64, body []byte) error
	tryPull  func(max int) ([]splBatch, error)
	compact  func() error
	requeue  func() (int, error)
	reqDead  func() (int, error)
	close    func() error
	deadVals func() ([]splValue, error)
	stats    func() queue.Stats
	recovery func() queue.Recovery
}

// splSegmentSize is the workload's SegmentSize: small, so that it rolls.
const splSegmentSize = 4096

// owner returns the queue itself, a *queue.Sorted or a *queue.Windowed.
func (q *splQueue) owner() any {
	if q.w != nil {
		return q.w
	}
	return q.s
}

// splBatch is a pulled batch, of either queue.
type splBatch struct {
	key    string
	values []splValue
	ack    func() error
	nack   func(time.Duration) error
	extend func(time.Duration) error
	dead   func(string) error
}

// splReadOnlyCount opens the queue in dir read-only (which repairs and
// writes nothing), given the workload's SegmentSize, and returns how many
// values it holds: pending, leased and dead.
func splReadOnlyCount(dir string, cfg splConfig) (int, error) {
	o := drainOptionsAs(splSegmentSize)
	o.ReadOnly = true
	q, err := openSplQueue(dir, cfg, o)
	if err != nil {
		return 0, err
	}
	defer q.close()
	st := q.stats()
	return st.SortedPending + st.SortedLeased + st.SortedDead, nil
}

func openSplQueue(dir string, cfg splConfig, o queue.Options) (*splQueue, error) {
	ctx := context.Background()
	so := queue.SortedOptions{Options: o, CacheBytes: 300}
	if cfg.windowed {
		w, err := queue.OpenWindowed(dir, &queue.WindowOptions{SortedOptions: so, Window: splWindow})
		if err != nil {
			return nil, err
		}
		return &splQueue{w: w, stats: w.Stats, recovery: w.Recovery,
			publish: func(key string, _ int64, body []byte) error { return w.Publish(ctx, key, body) },
			tryPull: func(max int) ([]splBatch, error) {
				bs, err := w.TryPull(max)
				return splBatches(bs, func(time.Time) int64 { return 0 }), err
			},
			compact: w.Compact, requeue: w.RequeueExpired, reqDead: w.RequeueAllDead, close: w.Close,
			deadVals: func() ([]splValue, error) { return deadOf(w.Sorted, func(time.Time) int64 { return 0 }) },
		}, nil
	}
	s, err := queue.OpenSorted[int64](dir, &so)
	if err != nil {
		return nil, err
	}
	return &splQueue{s: s, stats: s.Stats, recovery: s.Recovery,
		publish: func(key string, sort int64, body []byte) error { return s.Publish(ctx, sort, key, body) },
		tryPull: func(max int) ([]splBatch, error) {
			bs, err := s.TryPull(max)
			return splBatches(bs, func(k int64) int64 { return k }), err
		},
		compact: s.Compact, requeue: s.RequeueExpired, reqDead: s.RequeueAllDead, close: s.Close,
		deadVals: func() ([]splValue, error) { return deadOf(s, func(k int64) int64 { return k }) },
	}, nil
}

func splBatches[K queue.SortKey](bs []*queue.Batch[K], sortOf func(K) int64) []splBatch {
	out := make([]splBatch, len(bs))
	for i, b := range bs {
		sb := splBatch{key: b.Key, ack: b.Ack, nack: b.Nack, extend: b.Extend, dead: b.DeadLetter}
		for _, v := range b.Values {
			sb.values = append(sb.values, splValue{key: b.Key, sort: sortOf(v.Sort), body: string(v.Payload)})
		}
		out[i] = sb
	}
	return out
}

func deadOf[K queue.SortKey](s *queue.Sorted[K], sortOf func(K) int64) ([]splValue, error) {
	var out []splValue
	from := uint64(0)
	for {
		ds, err := s.DeadValues(from, 100)
		if err != nil || len(ds) == 0 {
			return out, err
		}
		for _, d := range ds {
			out = append(out, splValue{key: d.Key, sort: sortOf(d.Sort), body: string(d.Payload)})
		}
		from = ds[len(ds)-1].Seq + 1
	}
}

func splToken(body string) string { tok, _, _ := strings.Cut(body, "|"); return tok }

// splOptions are the workload's options, on the clock clock and the file
// system fsys.
func splOptions(cfg splConfig, clock queue.Clock, fsys *crashfs.FS) queue.Options {
	o := queue.Options{Sync: cfg.mode, SegmentSize: splSegmentSize, SnapshotBytes: 6000, ManualRequeue: true,
		MaxDeliveries: 3, AckTimeout: 5 * time.Second, Clock: clock, FS: fsys}
	if cfg.serial {
		testhook.SetManualCompaction(&o)
	}
	return o
}

// runSortedWorkload runs the workload on a crash file system that crashes
// at durable operation crashAt (0: never) and takes the image.
func runSortedWorkload(root string, cfg splConfig, crashAt int) (*splRun, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	fsys, err := crashfs.New(root, crashAt)
	if err != nil {
		return nil, err
	}
	run := &splRun{fsys: fsys, values: map[string]splValue{}}
	clock := newManualClock()
	q, err := openSplQueue(filepath.Join(root, "q"), cfg, splOptions(cfg, clock, fsys))
	if err == nil {
		rng := rand.New(rand.NewPCG(cfg.seed, 11))
		var held []splBatch
		crashed := false
		for i := 0; i < splOps && !crashed; i++ {
			op := splOp{tried: true}
			switch r := rng.IntN(100); {
			case r < 40:
				tok := fmt.Sprintf("V%d", i)
				v := splValue{key: fmt.Sprint("k", rng.IntN(4)), sort: int64(rng.IntN(16) - 5),
					body: tok + "|" + strings.Repeat("x", 50+rng.IntN(250))}
				run.values[tok] = v
				op.kind, op.toks = "publish", []string{tok}
				err = q.publish(v.key, v.sort, []byte(v.body))
			case r < 60:
				op.kind = "pull"
				var bs []splBatch
				bs, err = q.tryPull(1 + rng.IntN(6))
				if errors.Is(err, queue.ErrEmpty) {
					err = nil
				}
				held = append(held, bs...)
			case r < 88 && len(held) > 0:
				k := rng.IntN(len(held))
				b := held[k]
				held = append(held[:k], held[k+1:]...)
				for _, v := range b.values {
					op.toks = append(op.toks, splToken(v.body))
				}
				switch {
				case r < 74:
					op.kind, err = "ack", b.ack()
				case r < 80:
					op.kind, err = "nack", b.nack(time.Duration(rng.IntN(2))*time.Second)
				case r < 84:
					op.kind, err = "extend", b.extend(10*time.Second)
					held = append(held, b)
				default:
					op.kind, err = "dead", b.dead("test")
				}
				if errors.Is(err, queue.ErrLeaseLost) {
					err = nil // its lease ran out: the values went back
					op.kind += "-lost"
				}
			case r < 92:
				op.kind, err = "compact", q.compact()
			case r < 95:
				op.kind = "requeue-dead"
				_, err = q.reqDead()
			default:
				op.kind = "expire"
				clock.Advance(3 * time.Second)
				_, err = q.requeue()
			}
			if cfg.windowed {
				clock.Advance(300 * time.Millisecond)
			}
			op.ok = err == nil
			run.ops = append(run.ops, op)
			if err == nil && op.kind == "compact" {
				run.flushed = len(run.ops)
			}
			if err == nil && settlesEach(cfg.serial, cfg.mode) {
				err = settle(q.owner()) // a crash here ends the run; the call's outcome stands
			}
			if err != nil {
				crashed = true
			}
		}
		err = q.close()
		if err == nil && !crashed {
			run.flushed = len(run.ops)
		}
	}
	if err != nil && !fsys.Crashed() {
		return nil, fmt.Errorf("no crash yet, and: %w", err)
	}
	if err := fsys.Image(); err != nil {
		return nil, err
	}
	run.durable, _ = fsys.Ops()
	return run, nil
}

// check opens the state in dir with the workload's SegmentSize, as the
// application's own open would (under the default 4 MiB a full 4 KiB
// segment looks short), drains it and holds it to what the callers were
// told. Verify, run first with the same SegmentSize, must accept a state
// the open opens (verifyAgrees), and a read-only open, made first, must open
// where the writable open opens (unless the crash came before the queue
// held anything) and hold as many values as the drain finds.
func (run *splRun) check(dir string, cfg splConfig) error {
	_, vErr := queue.Verify(dir, &queue.VerifyOptions{SegmentSize: splSegmentSize})
	shown, roErr := splReadOnlyCount(dir, cfg)
	q, err := openSplQueue(dir, cfg, drainOptionsAs(splSegmentSize))
	if err != nil {
		return err
	}
	defer q.close()
	if err := verifyAgrees(vErr, q.recovery()); err != nil {
		return err
	}
	if rec := q.recovery(); roErr != nil && (rec.SnapshotLSN != 0 || rec.Replayed != 0) {
		return fmt.Errorf("a read-only open fails (%v) where the writable open opens", roErr)
	}
	if _, err := q.requeue(); err != nil {
		return err
	}
	if _, err := q.reqDead(); err != nil {
		return err
	}
	dead, err := q.deadVals()
	if err != nil || len(dead) > 0 {
		return fmt.Errorf("dead values left after RequeueAllDead: %d, %v", len(dead), err)
	}
	seen := map[string]bool{}
	for {
		bs, err := q.tryPull(50)
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		if err != nil {
			return fmt.Errorf("drain: %w", err)
		}
		for _, b := range bs {
			for i, v := range b.values {
				tok := splToken(v.body)
				want, ok := run.values[tok]
				switch {
				case !ok:
					return fmt.Errorf("drained a value never published: key %q body %.30q", b.key, v.body)
				case v.key != want.key || v.body != want.body || (!cfg.windowed && v.sort != want.sort):
					return fmt.Errorf("value %s came back as key %q sort %d body %.30q; published key %q sort %d body %.30q",
						tok, v.key, v.sort, v.body, want.key, want.sort, want.body)
				case seen[tok]:
					return fmt.Errorf("value %s drained twice", tok)
				case i > 0 && !cfg.windowed && v.sort < b.values[i-1].sort:
					return fmt.Errorf("batch of %q out of sort order at %s", b.key, tok)
				}
				seen[tok] = true
			}
			if err := b.ack(); err != nil {
				return fmt.Errorf("drain ack: %w", err)
			}
		}
	}
	if roErr == nil && len(seen) != shown {
		return fmt.Errorf("a read-only open, made first, shows %d values (pending, leased and dead), the drain finds %d", shown, len(seen))
	}
	counts := func(i int) bool { return cfg.mode == queue.SyncAlways || i < run.flushed }
	ackTried := map[string]bool{}
	for _, op := range run.ops {
		if op.kind == "ack" {
			for _, tok := range op.toks {
				ackTried[tok] = true
			}
		}
	}
	for i, op := range run.ops {
		switch {
		case op.kind == "publish" && op.ok && counts(i) && !ackTried[op.toks[0]] && !seen[op.toks[0]]:
			return fmt.Errorf("value %s lost: its Publish (op %d) returned nil and it was never acked", op.toks[0], i)
		case op.kind == "ack" && op.ok && counts(i):
			for _, tok := range op.toks {
				if seen[tok] {
					return fmt.Errorf("value %s came back after its batch's Ack (op %d) returned nil", tok, i)
				}
			}
		}
	}
	return nil
}
