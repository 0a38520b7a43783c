package fuzz_test

import (
	"errors"
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
// opened wrong. A first state the open refuses for one is skipped. The
// workload runs one call at a time (splConfig.serial, settlesEach), so
// that a seed gives the same first-crash states in every run.
//
// WALQ_REOPEN_STATES sets how many first-crash states are taken (default
// 40, 8 under -race); WALQ_REOPEN_BUG, prefixed with "reopen:", plants a
// durability bug (internal/testhook.PlantLogBug) in the log of the Open
// and Close that crash again.
func TestSortedPowerLossDuringRecovery(t *testing.T) {
	firsts := envInt(t, "WALQ_REOPEN_STATES", scaled(40, 5))
	_, reopenBug := plantedBugs(os.Getenv("WALQ_REOPEN_BUG"))
	for _, c := range sortedModes {
		t.Run(c.name, func(t *testing.T) {
			_, seed := testRand(t)
			cfg := splConfig{mode: c.mode, windowed: c.windowed, seed: seed, serial: true}
			n, err := reopenTwice(t, sortedReopenWorkload(cfg, reopenBug), firsts)
			t.Logf("SUMMARY sorted-reopen-%s: %d second-crash states checked", c.name, n)
			if err != nil {
				t.Fatalf("%v\n(replay: WALQ_SEED=%d)", err, seed)
			}
		})
	}
}

// sortedReopenWorkload is TestSortedPowerLoss's workload for
// reopenTwice, bug planted in the reopen's log: each second-crash state is
// judged as TestSortedPowerLoss judges a first one, a hole or writes
// reordered across segments refusable with ErrCorrupt.
func sortedReopenWorkload(cfg splConfig, bug string) reopenWorkload {
	run := func(root string, crashAt int) (*reopenFirst, error) {
		r, err := runSortedWorkload(root, cfg, crashAt)
		if err != nil {
			return nil, err
		}
		judge := func(dir string, st crashfs.State) error {
			excused := st.MayRefuse(dir) || reordered(st)
			err := r.check(filepath.Join(dir, "q"), cfg)
			if err != nil && excused && errors.Is(err, queue.ErrCorrupt) {
				return nil // a hole, or writes reordered across segments: refusable, as in TestSortedPowerLoss
			}
			return err
		}
		return &reopenFirst{fsys: r.fsys, durable: r.durable, judge: judge}, nil
	}
	reopen := func(root string, k int, compact bool) (*crashfs.FS, bool, error) {
		return splReopenCrashing(root, cfg, k, bug, compact)
	}
	return reopenWorkload{seed: cfg.seed, stream: 13, compacts: cfg.mode == queue.SyncAlways, run: run, reopen: reopen}
}

// splReopenCrashing opens and closes the queue under root with the
// workload's options on a crash file system that crashes at durable
// operation k, and takes its image; done says the Open and Close made
// fewer than k durable operations; with compact, a Compact runs between
// the Open and the Close (reopenWorkload.reopen). An error is an Open
// that failed before the crash.
func splReopenCrashing(root string, cfg splConfig, k int, bug string, compact bool) (*crashfs.FS, bool, error) {
	fsys, err := crashfs.New(root, k)
	if err != nil {
		return nil, false, err
	}
	o := splOptions(cfg, newManualClock(), fsys)
	if bug != "" {
		testhook.SetLogOptions(&o, func(lo any) { testhook.PlantLogBug(lo, bug) })
	}
	q, err := openSplQueue(filepath.Join(root, "q"), cfg, o)
	if err == nil && cfg.serial {
		err = settle(q.owner()) // the witness Open arms is written now, not only if Close comes late
		if err == nil && compact {
			err = q.compact()
		}
		err = errors.Join(err, q.close())
	} else if err == nil {
		err = q.close()
	}
	if err != nil && !fsys.Crashed() {
		return nil, false, err
	}
	done := !fsys.Crashed()
	return fsys, done, fsys.Image()
}
