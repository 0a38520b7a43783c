package fuzz_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
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
// state this finds. The workload runs one call at a time (plConfig.serial;
// under SyncAlways each call's records fsynced before the next, under
// SyncNever not: settlesEach), so that a seed gives the same first-crash
// states in every run; under SyncAlways it makes bursts of asynchronous
// enqueues whose records share one fsync (plWorkload.burst), the one way
// a crash leaves several callers' records in one unsynced group. Every
// other first crash is drawn near a segment roll, and under SyncAlways
// every third reopen compacts (reopenTwice).
//
// WALQ_REOPEN_STATES sets how many first-crash states are taken (default
// 150; 15 under -race, where every kind of first crash, near a roll or
// not, with a Compact in the reopen or not, is still taken, and fuzz/ci.sh
// runs the 150 without it), each crashed again at every durable operation
// of its Open.
// WALQ_REOPEN_BUG plants a durability bug in the workload's log
// (internal/testhook.PlantLogBug: early-durable, no-roll-dir-sync,
// no-seal-sync), which the test must then report; prefixed with "reopen:"
// (reopen:no-roll-dir-sync) it plants the bug only in the log of the
// second run, the Open and Close that crash again, so that the test is
// seen to catch a repair that is not crash-safe, which TestPowerLoss does
// not run. reopen:compact-no-snap-sync (SyncAlways) leaves the snapshot
// file of the reopen's Compact unsynced before its rename, and the log
// truncated after it: only the reopens that compact can show it (Close's
// own snapshot is still fsynced).
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
	firsts := envInt(t, "WALQ_REOPEN_STATES", scaled(150, 10))
	bug, reopenBug := plantedBugs(os.Getenv("WALQ_REOPEN_BUG"))
	for _, c := range []struct {
		name string
		mode queue.SyncMode
	}{{"always", queue.SyncAlways}, {"never", queue.SyncNever}} {
		t.Run(c.name, func(t *testing.T) {
			_, seed := testRand(t)
			cfg := plConfig{mode: c.mode, seed: seed, bug: bug, reopenBug: reopenBug, serial: true}
			n, err := reopenTwice(t, ackReopenWorkload(cfg), firsts)
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

// ackReopenWorkload is TestPowerLoss's workload for reopenTwice: each
// second-crash state is judged as TestPowerLoss judges a first one.
func ackReopenWorkload(cfg plConfig) reopenWorkload {
	run := func(root string, crashAt int) (*reopenFirst, error) {
		r, err := runCrashWorkload(root, cfg, crashAt)
		if err != nil {
			return nil, err
		}
		judge := func(dir string, st crashfs.State) error {
			_, _, err := r.check(dir, cfg.mode, st, false)
			return err
		}
		return &reopenFirst{fsys: r.fsys, durable: r.durable, crashed: r.crashed, judge: judge}, nil
	}
	reopen := func(root string, k int, compact bool) (*crashfs.FS, bool, error) {
		return reopenCrashing(root, cfg, k, compact)
	}
	return reopenWorkload{seed: cfg.seed, stream: 11, compacts: cfg.mode == queue.SyncAlways, run: run, reopen: reopen}
}

// reopenCrashing opens and closes the queue under root on a crash file
// system that crashes at durable operation k, and takes its image; done
// says the Open and Close made fewer than k durable operations (the image
// is then of a clean close). With compact, a Compact runs between them
// (reopenWorkload.reopen). An error is an Open that failed before the
// crash.
func reopenCrashing(root string, cfg plConfig, k int, compact bool) (*crashfs.FS, bool, error) {
	fsys, err := crashfs.New(root, k)
	if err != nil {
		return nil, false, err
	}
	opts := &queue.Options{Sync: cfg.mode, SyncInterval: time.Millisecond, SegmentSize: plSegmentSize, SnapshotBytes: 8000,
		ManualRequeue: true, MaxDeliveries: 3, AckTimeout: 5 * time.Second, Clock: newManualClock(), FS: fsys}
	var compacting atomic.Bool
	switch cfg.reopenBug {
	case "":
	case compactNoSnapSync:
		opts.FS = unsyncedCompactSnapshots{FS: fsys, compacting: &compacting}
	default:
		testhook.SetLogOptions(opts, func(o any) { testhook.PlantLogBug(o, cfg.reopenBug) })
	}
	if cfg.serial {
		testhook.SetManualCompaction(opts)
	}
	q, err := queue.Open(filepath.Join(root, "q"), opts)
	if err == nil && cfg.serial {
		err = settle(q) // the witness Open arms is written now, not only if Close comes late
		if err == nil && compact {
			compacting.Store(true)
			err = q.Compact()
			compacting.Store(false)
		}
		err = errors.Join(err, q.Close())
	} else if err == nil {
		err = q.Close()
	}
	if err != nil && !fsys.Crashed() {
		return nil, false, err
	}
	done := !fsys.Crashed()
	return fsys, done, fsys.Image()
}

// compactNoSnapSync names the planted bug unsyncedCompactSnapshots makes.
const compactNoSnapSync = "compact-no-snap-sync"

// unsyncedCompactSnapshots plants compactNoSnapSync in the reopen: while
// compacting is set (the reopen's Compact runs), the fsync of a snapshot
// file written before its rename does nothing, so that the rename, the
// directory fsync and the log's truncation that follow it rest on bytes
// that never reached the disk. Everything else is the crash file system's.
type unsyncedCompactSnapshots struct {
	*crashfs.FS
	compacting *atomic.Bool
}

func (u unsyncedCompactSnapshots) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	f, err := u.FS.OpenFile(name, flag, perm)
	if err != nil || !u.compacting.Load() || !strings.HasSuffix(name, ".snap.tmp") {
		return f, err
	}
	return unsyncedFile{f}, nil
}

// unsyncedFile is a file whose fsync is planted away.
type unsyncedFile struct{ wal.File }

func (unsyncedFile) Sync() error { return nil }
