package fuzz_test

import (
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

// TestPowerLossDuringRecovery loses power a second time while a queue
// opens a state the first power loss left: the Open that repairs it (a
// torn tail or roll cut, leases ended, a clean close written) crashes at
// each of its durable operations, and at each its Close makes, and the
// states that second crash can leave are opened with the real file system
// and judged as TestPowerLoss judges the first: nothing acknowledged
// before the first crash is lost or delivered again once acked, and the
// queue is the state after some operation of the workload. A repair that
// is not itself crash-safe (a cut made durable before the removal it
// rests on, a record written after a cut that is not durable) leaves a
// state this finds.
//
// WALQ_REOPEN_STATES sets how many first-crash states are taken (default
// 150, 30 under -race), each crashed again at every durable operation of its Open.
// WALQ_REOPEN_BUG plants a durability bug in the workload's log
// (internal/testhook.PlantLogBug: early-durable, no-roll-dir-sync,
// no-seal-sync), which the test must then report; prefixed with "reopen:"
// (reopen:no-roll-dir-sync) it plants the bug only in the log of the
// second run, the Open and Close that crash again, so that the test is
// seen to catch a repair that is not crash-safe, which TestPowerLoss does
// not run.
//
// reopen:early-durable is not reported, and cannot matter here. It
// completes the commits of an fsync job, and raises DurableLSN, just
// before the syncer runs that fsync (wal/syncer.go runSync); so it
// changes what a caller that waits for a commit's durability learns, and
// nothing on disk. Under SyncNever no commit waits for an fsync at all.
// Under SyncAlways the second run has two such callers, and neither tells
// anyone or builds anything durable on the early news:
//
//   - Open waits for no fsync: the returns of the crashed leases and the
//     copies of a salvage are appended without waiting, or waited for as
//     written (WaitWritten), and DurableLSN is read only by enqueues and
//     Stats.
//   - Close waits for its clean-close record, then takes a snapshot (as a
//     salvaging Open does after its copies): the only file the queue
//     builds on a completed commit. It makes the log durable first with
//     Log.Flush, which waits for the fsync in flight (committer.drainSyncs)
//     and fsyncs what is left itself, never ahead of the data. If the
//     crash takes the fsync of the close record, every later call of the
//     crash file system fails, so Close returns an error (ignored here, as
//     any after the crash) and the state is one the queue without the bug
//     leaves: the log without its clean close.
//
// With a 2 ms sleep between the early completion and the fsync, so that
// Close's snapshot would run ahead of it were it not for Flush, the
// default run (2,436 and 2,242 second-crash states) still passed. The
// workload's promises to its callers, the ones early-durable breaks, are
// TestPowerLoss's: it plants the bug in the workload's log and catches it
// (TestPowerLossCatchesPlantedBugs).
func TestPowerLossDuringRecovery(t *testing.T) {
	firsts := envInt(t, "WALQ_REOPEN_STATES", scaled(150, 5))
	bug, reopenBug := plantedBugs(os.Getenv("WALQ_REOPEN_BUG"))
	for _, c := range []struct {
		name string
		mode queue.SyncMode
	}{{"always", queue.SyncAlways}, {"never", queue.SyncNever}} {
		t.Run(c.name, func(t *testing.T) {
			_, seed := testRand(t)
			n, err := powerLossTwice(t, plConfig{mode: c.mode, seed: seed, bug: bug, reopenBug: reopenBug}, firsts)
			t.Logf("SUMMARY reopen-%s: %d second-crash states checked", c.name, n)
			if err != nil {
				t.Fatalf("%v\n(replay: WALQ_SEED=%d)", err, seed)
			}
		})
	}
}

// plantedBugs splits a WALQ_REOPEN_BUG value into the bug planted in the
// workload's log and the one planted only in the reopen's.
func plantedBugs(v string) (workload, reopen string) {
	if name, ok := strings.CutPrefix(v, "reopen:"); ok {
		return "", name
	}
	return v, ""
}

// powerLossTwice builds firsts states of the workload's crashes, spread
// over its crash points, and crashes the Open of each again; it returns
// how many second-crash states it checked.
func powerLossTwice(t *testing.T, cfg plConfig, firsts int) (int, error) {
	base := scratchDir(t)
	dry, err := runCrashWorkload(filepath.Join(base, "dry"), cfg, 0)
	if err != nil {
		return 0, err
	}
	rng := rand.New(rand.NewPCG(cfg.seed, 11))
	checked := 0
	for i := range firsts {
		n := 1 + rng.IntN(dry.durable+1)
		root := filepath.Join(base, fmt.Sprint("run-", i))
		run, err := runCrashWorkload(root, cfg, n)
		if err != nil {
			return checked, err
		}
		first := filepath.Join(base, fmt.Sprint("first-", i))
		st, err := run.fsys.Materialize(first, rng)
		os.RemoveAll(root)
		if err != nil {
			return checked, err
		}
		what := fmt.Sprintf("first crash at durable operation %d (%s): %s", n, run.crashed, st.Desc)
		k, err := crashReopen(base, first, run, cfg, st, rng)
		checked += k
		os.RemoveAll(first)
		if err != nil {
			return checked, fmt.Errorf("%s: %w", what, err)
		}
	}
	return checked, nil
}

// crashReopen opens the first-crash state in first with the workload's
// options on a crash file system that crashes at each durable operation
// of the Open and the Close in turn, and judges two states each crash can
// leave. A first state the real open refuses (a hole, or writes reordered
// across segments) is skipped.
func crashReopen(base, first string, run *plCrashRun, cfg plConfig, st crashfs.State, rng *rand.Rand) (int, error) {
	checked := 0
	for k := 1; ; k++ {
		root := filepath.Join(base, "second")
		os.RemoveAll(root)
		if err := copyDir(first, root); err != nil {
			return checked, err
		}
		fsys, done, err := reopenCrashing(root, cfg, k)
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
			_, _, err = run.check(dst, cfg.mode, st2, false)
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

// reopenCrashing opens and closes the queue under root on a crash file
// system that crashes at durable operation k, and takes its image; done
// says the Open and Close made fewer than k durable operations (the image
// is then of a clean close). An error is an Open that failed before the
// crash.
func reopenCrashing(root string, cfg plConfig, k int) (*crashfs.FS, bool, error) {
	fsys, err := crashfs.New(root, k)
	if err != nil {
		return nil, false, err
	}
	opts := &queue.Options{Sync: cfg.mode, SyncInterval: time.Millisecond, SegmentSize: plSegmentSize, SnapshotBytes: 8000,
		ManualRequeue: true, MaxDeliveries: 3, AckTimeout: 5 * time.Second, Clock: newManualClock(), FS: fsys}
	if cfg.reopenBug != "" {
		testhook.SetLogOptions(opts, func(o any) { testhook.PlantLogBug(o, cfg.reopenBug) })
	}
	q, err := queue.Open(filepath.Join(root, "q"), opts)
	if err == nil {
		err = q.Close()
	}
	if err != nil && !fsys.Crashed() {
		return nil, false, err
	}
	done := !fsys.Crashed()
	return fsys, done, fsys.Image()
}
