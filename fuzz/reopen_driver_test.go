package fuzz_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/queue"
)

// reopenWorkload is what a power-loss workload gives reopenTwice: how to
// run it to a first crash, how to open and close a state it left on a
// file system that crashes again, and how to judge what that second crash
// leaves.
type reopenWorkload struct {
	seed   uint64 // the test's seed
	stream uint64 // the PCG stream of the first-crash choices, one per workload
	// run runs the workload in root on a crash file system that crashes
	// at durable operation crashAt (0: never) and takes its image.
	run func(root string, crashAt int) (*reopenFirst, error)
	// reopen opens and closes the queue under root on a crash file system
	// that crashes at durable operation k, and takes its image; done says
	// the Open and Close made fewer than k durable operations. An error
	// is an Open that failed before the crash.
	reopen func(root string, k int) (fsys *crashfs.FS, done bool, err error)
}

// reopenFirst is a run of the workload that reopenTwice crashes again.
type reopenFirst struct {
	fsys    *crashfs.FS // the run's crash file system, its image taken
	durable int         // durable operations the run made
	crashed string      // the call the crash came during; "" when not told
	// judge checks the second-crash state materialized in dir (st its
	// description) against what the run's callers were told.
	judge func(dir string, st crashfs.State) error
}

// reopenTwice builds firsts states of the workload's crashes, spread over
// its crash points, and crashes the Open and Close of each again at each
// of their durable operations; it returns how many second-crash states it
// checked.
func reopenTwice(t *testing.T, w reopenWorkload, firsts int) (int, error) {
	base := scratchDir(t)
	dry, err := w.run(filepath.Join(base, "dry"), 0)
	if err != nil {
		return 0, err
	}
	pick := rand.New(rand.NewPCG(w.seed, w.stream))
	checked := 0
	for i := range firsts {
		n := 1 + pick.IntN(dry.durable+1)
		// Each first state draws its states from a generator of its own,
		// so that one state that timing changed changes no other.
		rng := rand.New(rand.NewPCG(w.seed, w.stream<<32|uint64(i+1)))
		root := filepath.Join(base, fmt.Sprint("run-", i))
		run, err := w.run(root, n)
		if err != nil {
			return checked, err
		}
		first := filepath.Join(base, fmt.Sprint("first-", i))
		st, err := run.fsys.Materialize(first, rng)
		os.RemoveAll(root)
		if err != nil {
			return checked, err
		}
		k, err := w.crashReopen(base, first, run, st, rng)
		checked += k
		os.RemoveAll(first)
		if err != nil {
			return checked, fmt.Errorf("%s: %w", firstCrash(n, run.crashed, st), err)
		}
	}
	return checked, nil
}

// firstCrash describes a first crash at durable operation n.
func firstCrash(n int, crashed string, st crashfs.State) string {
	if crashed != "" {
		return fmt.Sprintf("first crash at durable operation %d (%s): %s", n, crashed, st.Desc)
	}
	return fmt.Sprintf("first crash at durable operation %d: %s", n, st.Desc)
}

// crashReopen opens the first-crash state in first on a crash file system
// that crashes at each durable operation of the Open and the Close in
// turn, and judges two states each crash can leave. A first state the
// real open refuses (a hole, or writes reordered across segments) is
// skipped.
func (w reopenWorkload) crashReopen(base, first string, run *reopenFirst, st crashfs.State, rng *rand.Rand) (int, error) {
	checked := 0
	for k := 1; ; k++ {
		root := filepath.Join(base, "second")
		os.RemoveAll(root)
		if err := copyDir(first, root); err != nil {
			return checked, err
		}
		fsys, done, err := w.reopen(root, k)
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
			err = run.judge(dst, st2)
			os.RemoveAll(dst)
			checked++
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
