package fuzz_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestSortedPowerLossDuringRecovery is TestPowerLossDuringRecovery for the
// sorted and windowed queues: the Open (and Close) of a state a first
// power loss left in TestSortedPowerLoss's workload crashes again at each
// of its durable operations, with the workload's options (SegmentSize
// included), and two states each second crash can leave are judged as
// TestSortedPowerLoss judges the first: a state with a hole or with
// writes reordered across segments may be refused with ErrCorrupt, never
// opened wrong. A first state the open refuses for one is skipped.
//
// WALQ_REOPEN_STATES sets how many first-crash states are taken (default
// 40, 8 under -race); WALQ_REOPEN_BUG, prefixed with "reopen:", plants a
// durability bug (internal/testhook.PlantLogBug) in the log of the Open
// and Close that crash again.
func TestSortedPowerLossDuringRecovery(t *testing.T) {
	firsts := envInt(t, "WALQ_REOPEN_STATES", scaled(40, 5))
	_, reopenBug := plantedBugs(os.Getenv("WALQ_REOPEN_BUG"))
	for _, c := range []struct {
		name     string
		mode     queue.SyncMode
		windowed bool
	}{
		{"sorted-always", queue.SyncAlways, false},
		{"sorted-never", queue.SyncNever, false},
		{"windowed-always", queue.SyncAlways, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, seed := testRand(t)
			cfg := splConfig{mode: c.mode, windowed: c.windowed, seed: seed}
			n, err := splPowerLossTwice(t, cfg, firsts, reopenBug)
			t.Logf("SUMMARY sorted-reopen-%s: %d second-crash states checked", c.name, n)
			if err != nil {
				t.Fatalf("%v\n(replay: WALQ_SEED=%d)", err, seed)
			}
		})
	}
}

// splPowerLossTwice builds firsts states of the workload's crashes, spread
// over its crash points, and crashes the Open of each again; it returns
// how many second-crash states it checked.
func splPowerLossTwice(t *testing.T, cfg splConfig, firsts int, bug string) (int, error) {
	base := scratchDir(t)
	dry, err := runSortedWorkload(filepath.Join(base, "dry"), cfg, 0)
	if err != nil {
		return 0, err
	}
	rng := rand.New(rand.NewPCG(cfg.seed, 13))
	checked := 0
	for i := range firsts {
		n := 1 + rng.IntN(dry.durable+1)
		root := filepath.Join(base, fmt.Sprint("run-", i))
		run, err := runSortedWorkload(root, cfg, n)
		if err != nil {
			return checked, err
		}
		first := filepath.Join(base, fmt.Sprint("first-", i))
		st, err := run.fsys.Materialize(first, rng)
		os.RemoveAll(root)
		if err != nil {
			return checked, err
		}
		k, err := run.crashReopen(base, first, cfg, st, rng, bug)
		checked += k
		os.RemoveAll(first)
		if err != nil {
			return checked, fmt.Errorf("first crash at durable operation %d: %s: %w", n, st.Desc, err)
		}
	}
	return checked, nil
}

// crashReopen opens the first-crash state in first on a crash file system
// that crashes at each durable operation of the Open and the Close in
// turn, and judges two states each crash can leave.
func (run *splRun) crashReopen(base, first string, cfg splConfig, st crashfs.State, rng *rand.Rand, bug string) (int, error) {
	checked := 0
	for k := 1; ; k++ {
		root := filepath.Join(base, "second")
		os.RemoveAll(root)
		if err := copyDir(first, root); err != nil {
			return checked, err
		}
		fsys, done, err := splReopenCrashing(root, cfg, k, bug)
		if err != nil {
			os.RemoveAll(root)
			if errors.Is(err, queue.ErrCorrupt) && (holeRefusable(first, st) || reordered(st)) {
				return checked, nil
			}
			return checked, fmt.Errorf("reopen (crash at its durable operation %d): %w", k, err)
		}
		for v := range 2 {
			dst := filepath.Join(base, fmt.Sprint("state-", k, "-", v))
			st2, err := fsys.Materialize(dst, rng)
			if err != nil {
				return checked, err
			}
			excused := holeRefusable(dst, st2) || reordered(st2)
			err = run.check(filepath.Join(dst, "q"), cfg)
			os.RemoveAll(dst)
			checked++
			if err != nil && excused && errors.Is(err, queue.ErrCorrupt) {
				continue // a hole, or writes reordered across segments: refusable, as in TestSortedPowerLoss
			}
			if err != nil {
				return checked, fmt.Errorf("second crash at durable operation %d of the reopen, state %d: %s: %w", k, v, st2.Desc, err)
			}
		}
		os.RemoveAll(root)
		if done {
			return checked, nil
		}
	}
}

// splReopenCrashing opens and closes the queue under root with the
// workload's options on a crash file system that crashes at durable
// operation k, and takes its image; done says the Open and Close made
// fewer than k durable operations. An error is an Open that failed
// before the crash.
func splReopenCrashing(root string, cfg splConfig, k int, bug string) (*crashfs.FS, bool, error) {
	fsys, err := crashfs.New(root, k)
	if err != nil {
		return nil, false, err
	}
	o := splOptions(cfg, newManualClock(), fsys)
	if bug != "" {
		testhook.SetLogOptions(&o, func(lo any) { testhook.PlantLogBug(lo, bug) })
	}
	q, err := openSplQueue(filepath.Join(root, "q"), cfg, o)
	if err == nil {
		err = q.close()
	}
	if err != nil && !fsys.Crashed() {
		return nil, false, err
	}
	done := !fsys.Crashed()
	return fsys, done, fsys.Image()
}
