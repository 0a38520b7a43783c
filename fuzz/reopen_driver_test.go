package fuzz_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
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
	// compacts: every third reopen runs a compaction (reopenCompacts);
	// false under SyncNever, whose runs are not to grow
	compacts bool
	// run runs the workload in root on a crash file system that crashes
	// at durable operation crashAt (0: never) and takes its image.
	run func(root string, crashAt int) (*reopenFirst, error)
	// reopen opens and closes the queue under root on a crash file system
	// that crashes at durable operation k, and takes its image; done says
	// the Open and Close made fewer than k durable operations. With
	// compact, a Compact runs between the Open and the Close: the pass the
	// background compaction makes once a reopened queue's log has grown,
	// called in the foreground so that its durable operations fall at the
	// same place in every run. An error is an Open that failed before the
	// crash.
	reopen func(root string, k int, compact bool) (fsys *crashfs.FS, done bool, err error)
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
// checked. Every other first crash is drawn near a segment roll of the
// run without a crash (nearRolls): there the tail a crash leaves is
// nearly full, so that the records the Open appends (the returns of the
// crashed leases) and Close's can fill it and roll, and the reopen must
// seal a segment it wrote to, as a crash drawn anywhere rarely makes it.
// Under SyncAlways every third first state is reopened with a compaction
// (reopenCompacts).
func reopenTwice(t *testing.T, w reopenWorkload, firsts int) (int, error) {
	base := scratchDir(t)
	dry, err := w.run(filepath.Join(base, "dry"), 0)
	if err != nil {
		return 0, err
	}
	near := nearRolls(dry.fsys.Log())
	pick := rand.New(rand.NewPCG(w.seed, w.stream))
	checked := 0
	for i := range firsts {
		n := 1 + pick.IntN(dry.durable+1)
		if i%2 == 1 && len(near) > 0 {
			n = near[pick.IntN(len(near))]
		}
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
		compact := w.compacts && reopenCompacts(i)
		k, err := w.crashReopen(base, first, run, st, rng, compact)
		checked += k
		os.RemoveAll(first)
		if err != nil {
			return checked, fmt.Errorf("%s%s: %w", firstCrash(n, run.crashed, st), compactNote(compact), err)
		}
	}
	return checked, nil
}

// rollReach is how many durable operations before a segment roll's
// directory fsync a first crash drawn near that roll may fall: under
// SyncAlways each call of the workload fsyncs its records once, so that
// the last calls before the roll leave the tail within a few records of
// full.
const rollReach = 6

// nearRolls returns the crash points (durable operations, from 1) at most
// rollReach before each segment roll in log (a run's crashfs.Log), the
// roll's directory fsync included. A roll is a directory fsync of the
// log directory (q/log) that follows the fsync of a segment in it: wal
// fsyncs the segment it seals, then the directory that holds the next
// one's name (wal/seal.go syncRolled). The other directory fsyncs that
// follow a file's (the queue's identity file, a snapshot's rename) are
// not rolls. Each point appears once, in order.
func nearRolls(log []crashfs.Op) []int {
	var out []int
	for i := range log {
		if !isRoll(log, i) {
			continue
		}
		for n := max(i+1-rollReach, 1); n <= i+1; n++ {
			if len(out) == 0 || n > out[len(out)-1] {
				out = append(out, n)
			}
		}
	}
	return out
}

// isRoll reports whether log[i] is the directory fsync of a segment roll:
// of the log directory, right after the fsync of a segment it holds (the
// one the roll seals).
func isRoll(log []crashfs.Op, i int) bool {
	return i > 0 && log[i].Kind == "dirsync" && log[i].Name == filepath.Join("q", "log") && isLogSegment(log[i-1].Name)
}

// reopenCompacts says whether the reopen of first state i runs a
// compaction: every third one does, so that a second crash falls in its
// snapshot, its copies forward and its truncation of the log front, and
// the other two keep the repair itself as the only thing the reopen does.
func reopenCompacts(i int) bool { return i%3 == 2 }

func compactNote(compact bool) string {
	if compact {
		return " (reopened with a compaction)"
	}
	return ""
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
func (w reopenWorkload) crashReopen(base, first string, run *reopenFirst, st crashfs.State, rng *rand.Rand, compact bool) (int, error) {
	checked := 0
	for k := 1; ; k++ {
		root := filepath.Join(base, "second")
		os.RemoveAll(root)
		if err := copyDir(first, root); err != nil {
			return checked, err
		}
		fsys, done, err := w.reopen(root, k, compact)
		if err != nil {
			os.RemoveAll(root)
			if errors.Is(err, queue.ErrCorrupt) && (st.MayRefuse(first) || reordered(st)) {
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

// TestNearRollsOnlyNearSegmentRolls checks that the first crashes drawn
// near rolls are drawn near segment rolls alone: the directory fsyncs
// that follow the identity file's fsync at creation and a snapshot's
// before its rename are not rolls, and a draw near them would spend the
// near-roll crashes where the tail is not full.
func TestNearRollsOnlyNearSegmentRolls(t *testing.T) {
	seg := func(n int) string { return filepath.Join("q", "log", fmt.Sprintf("%020d", n)) }
	log := []crashfs.Op{
		{Kind: "dirsync", Name: "."},
		{Kind: "fsync", Name: "q/IDENTITY.tmp"},
		{Kind: "dirsync", Name: "q"}, // 3: the identity file's name
		{Kind: "dirsync", Name: "q/log"},
	}
	for range 8 {
		log = append(log, crashfs.Op{Kind: "fdatasync", Name: seg(1)}) // 5-12
	}
	log = append(log,
		crashfs.Op{Kind: "fsync", Name: "q/snapshot-00000000000000000007.snap.tmp"},
		crashfs.Op{Kind: "dirsync", Name: "q"}, // 14: the snapshot's rename
		crashfs.Op{Kind: "fdatasync", Name: seg(1)},
		crashfs.Op{Kind: "dirsync", Name: "q/log"}, // 16: the roll that seals segment 1
		crashfs.Op{Kind: "fdatasync", Name: seg(9)},
	)
	want := []int{10, 11, 12, 13, 14, 15, 16}
	if got := nearRolls(log); !slices.Equal(got, want) {
		t.Fatalf("nearRolls = %v, want %v (the 6 operations before the roll at 16, and the roll)", got, want)
	}
}
