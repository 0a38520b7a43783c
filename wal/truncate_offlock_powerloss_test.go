package wal_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/wal"
)

// unlinkGateFS is a gate over a crash file system that holds the first
// removal of a segment file, once armed, until the test lets it go. With
// steps set, it then takes the power away (crashfs.FS.Image) just before
// the left-th removal or directory fsync made after the release, the held
// removal counted first, or, when fewer are made, just after TruncateFront
// returned (crashAtReturn).
type unlinkGateFS struct {
	*gateFS
	cfs *crashfs.FS

	smu      sync.Mutex // guards the fields below
	steps    bool       // crash at a step of the truncation, not at a durable operation
	rolls    bool       // with steps: write and roll just before the crash
	counting bool       // the held removal was let go: count the steps
	left     int        // steps to let run before the crash; -1 once crashed
	between  func()     // run at the step that crashes, before the crash
}

// newUnlinkGateFS returns the gate over cfs; steps, rolls and left as in
// unlinkGateFS.
func newUnlinkGateFS(cfs *crashfs.FS, steps, rolls bool, left int) *unlinkGateFS {
	g := &unlinkGateFS{gateFS: newGateFS(cfs, "unlink"), cfs: cfs, steps: steps, rolls: rolls, left: left}
	g.before = g.step
	return g
}

// step counts one removal or directory fsync after the release and takes
// the power away before the left-th, after between ran (writes and rolls
// the truncation's caller does not wait for); the call then fails.
func (g *unlinkGateFS) step() {
	g.smu.Lock()
	if !g.counting || g.left < 0 {
		g.smu.Unlock()
		return
	}
	if g.left > 0 {
		g.left--
		g.smu.Unlock()
		return
	}
	g.left = -1
	between := g.between
	g.smu.Unlock()
	if between != nil {
		between()
	}
	_ = g.cfs.Image()
}

// goOn lets the held removal go, and from then on counts the steps.
func (g *unlinkGateFS) goOn() {
	g.smu.Lock()
	g.counting = g.steps
	g.smu.Unlock()
	g.release(nil)
}

// crashAtReturn takes the power away just after TruncateFront returned
// when steps is set and no step crashed; it reports whether the run ends
// here (steps set).
func (g *unlinkGateFS) crashAtReturn() bool {
	g.smu.Lock()
	defer g.smu.Unlock()
	if g.steps && g.left >= 0 {
		_ = g.cfs.Image()
		g.left = -2 // crashed at the return
	}
	return g.steps
}

// overlapRun is what the overlapped truncation's workload saw before the
// crash.
type overlapRun struct {
	acked     map[int]wal.LSN // records reported durable: id -> LSN
	cut       wal.LSN         // TruncateFront's argument; 0 when not called
	truncated bool            // TruncateFront returned nil
}

// powerRecord is record id of the overlap workload, 500 bytes.
func powerRecord(id int) []byte {
	s := fmt.Sprintf("rec-%05d-", id)
	return []byte(s + strings.Repeat("x", 500-len(s)))
}

// overlapWorkload fills four 4 KiB segments (acknowledged by a Flush),
// then truncates below the last sealed one with its first unlink held
// while 20 more records are appended and waited for one by one (two rolls
// or more), then lets the truncation go on, appends 5 more once it has
// returned and closes the log.
func overlapWorkload(dir string, opts *wal.Options, g *unlinkGateFS) overlapRun {
	defer g.goOn()
	run := overlapRun{acked: map[int]wal.LSN{}}
	l, err := wal.Open(dir, opts)
	if err != nil {
		return run
	}
	defer l.Close()
	id, pending := 0, map[int]wal.LSN{}
	for len(l.Segments()) < 4 || l.Segments()[len(l.Segments())-1].FirstLSN == 0 {
		lsn, c, err := l.Append(powerRecord(id))
		if err == nil {
			err = c.WaitWritten()
		}
		if err != nil {
			return run
		}
		pending[id] = lsn
		id++
	}
	if l.Flush() != nil {
		return run
	}
	run.acked = pending
	segs := l.Segments()
	run.cut = segs[len(segs)-2].FirstLSN
	g.arm()
	res := make(chan error, 1)
	go func() { res <- l.TruncateFront(run.cut) }()
	select {
	case <-g.reached:
	case err := <-res:
		run.truncated = err == nil
		return run
	}
	id = appendWaited(l, run.acked, id, 20)
	if g.rolls {
		g.between = func() { id = appendWaited(l, run.acked, id, 10) }
	}
	g.goOn()
	run.truncated = <-res == nil
	if g.crashAtReturn() {
		return run
	}
	appendWaited(l, run.acked, id, 5) // crash points after TruncateFront returned
	return run
}

// appendWaited appends n records from id on, waiting for each, records
// those reported durable in acked, and returns the next id.
func appendWaited(l *wal.Log, acked map[int]wal.LSN, id, n int) int {
	for range n {
		lsn, c, err := l.Append(powerRecord(id))
		if err == nil {
			err = c.Wait()
		}
		if err != nil {
			break
		}
		acked[id] = lsn
		id++
	}
	return id
}

// TestPowerLossInOverlappedTruncation: a truncation whose unlinks and
// directory fsyncs run while other callers write, wait and roll. At every
// durable operation, every state a power loss can leave opens with every
// record reported durable at or above the cut, each once, at its LSN, in
// order; FirstLSN never passes the cut, and is the cut once TruncateFront
// returned nil.
func TestPowerLossInOverlappedTruncation(t *testing.T) {
	states := raceScaled(40, 4)
	opts := wal.Options{Sync: wal.SyncAlways, SegmentSize: 4 << 10, Locked: true}
	for crashAt := 1; ; crashAt++ {
		root := t.TempDir()
		cfs, err := crashfs.New(root, crashAt)
		if err != nil {
			t.Fatal(err)
		}
		g := newUnlinkGateFS(cfs, false, false, 0)
		o := opts
		o.FS = g
		run := overlapWorkload(filepath.Join(root, "log"), &o, g)
		if !cfs.Crashed() {
			if !run.truncated || len(run.acked) < 30 {
				t.Fatalf("no crash, truncated %v, %d records acknowledged", run.truncated, len(run.acked))
			}
			t.Logf("%d durable operations, %d states each", crashAt-1, states)
			return
		}
		if err := cfs.Image(); err != nil {
			t.Fatal(err)
		}
		for s := range states {
			checkOverlapState(t, cfs, fmt.Sprintf("crash at durable op %d", crashAt), uint64(crashAt), s, opts.SegmentSize, run)
		}
	}
}

// TestPowerLossAtEachTruncationStep: the overlapped truncation of
// TestPowerLossInOverlappedTruncation, with the power taken away at a
// chosen moment rather than at a durable operation, so that each moment
// is met in every run: just before each removal and directory fsync the
// truncation makes once the writes and rolls during its hold are done
// (the unlinks, their fsync, the marker's removal, its fsync), and just
// after TruncateFront returned; with rolls, other callers first write and
// roll there (the roll's directory fsync makes the unlinks before it
// durable). Each state a power loss there can leave opens with every
// acknowledged record at or above the cut, once, and FirstLSN at the cut
// after the return.
func TestPowerLossAtEachTruncationStep(t *testing.T) {
	for _, rolls := range []bool{false, true} {
		t.Run(fmt.Sprintf("rolls=%v", rolls), func(t *testing.T) {
			for step := 0; ; step++ {
				if powerLossAtStep(t, step, rolls) {
					return
				}
			}
		})
	}
}

// powerLossAtStep runs the overlapped truncation with the power taken
// away at step (TestPowerLossAtEachTruncationStep) and checks the states
// it leaves. It reports whether the power went after TruncateFront
// returned, the last step.
func powerLossAtStep(t *testing.T, step int, rolls bool) bool {
	states := raceScaled(150, 5)
	opts := wal.Options{Sync: wal.SyncAlways, SegmentSize: 4 << 10, Locked: true}
	root := t.TempDir()
	cfs, err := crashfs.New(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	g := newUnlinkGateFS(cfs, true, rolls, step)
	o := opts
	o.FS = g
	run := overlapWorkload(filepath.Join(root, "log"), &o, g)
	if !cfs.Crashed() {
		t.Fatalf("step %d: no crash: TruncateFront returned (nil: %v) before its first segment removal was let go", step, run.truncated)
	}
	returned := g.left == -2
	if returned && (!run.truncated || step < 5) {
		t.Fatalf("TruncateFront returned (nil: %v) after %d steps; want nil after 5 or more "+
			"(2 unlinks or more, fsync, marker removal, fsync)", run.truncated, step)
	}
	at := fmt.Sprintf("power lost before step %d of the truncation", step)
	if returned {
		at = fmt.Sprintf("power lost after TruncateFront returned (%d steps)", step)
	}
	for s := range states {
		checkOverlapState(t, cfs, at, uint64(1000+step), s, opts.SegmentSize, run)
	}
	if returned {
		t.Logf("%d steps, %d states each, and after the return; %d records acknowledged", step, states, len(run.acked))
	}
	return returned
}

// checkOverlapState materializes state s of cfs's image and checks it
// against run (see TestPowerLossInOverlappedTruncation).
func checkOverlapState(t *testing.T, cfs *crashfs.FS, at string, seed uint64, s int, segSize int64, run overlapRun) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "state")
	st, err := cfs.Materialize(dst, rand.New(rand.NewPCG(seed, uint64(s))))
	if err != nil {
		t.Fatal(err)
	}
	where := fmt.Sprintf("%s, state %d (%s), cut %d, truncated %v, %d acknowledged",
		at, s, st.Desc, run.cut, run.truncated, len(run.acked))
	state := filepath.Join(dst, "log")
	if _, err := os.Stat(state); err != nil {
		if len(run.acked) > 0 {
			t.Fatalf("%s: the log directory was lost", where)
		}
		return
	}
	l, err := wal.Open(state, &wal.Options{SegmentSize: segSize})
	if err != nil && errors.Is(err, wal.ErrCorrupt) && st.MayRefuse(dst) {
		return
	}
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	defer closeLog(t, l)
	first := l.FirstLSN()
	if run.cut > 0 && first > run.cut {
		t.Fatalf("%s: FirstLSN %d is past the cut", where, first)
	}
	if run.truncated && first != run.cut {
		t.Fatalf("%s: FirstLSN %d after TruncateFront(%d) returned nil", where, first, run.cut)
	}
	lsns, recs := readAll(t, l, first)
	seen := map[int]wal.LSN{}
	for i, rec := range recs {
		var id int
		if _, err := fmt.Sscanf(string(rec), "rec-%05d-", &id); err != nil {
			t.Fatalf("%s: record at LSN %d is not one appended", where, lsns[i])
		}
		if at, dup := seen[id]; dup {
			t.Fatalf("%s: record %d read twice, at LSN %d and %d", where, id, at, lsns[i])
		}
		seen[id] = lsns[i]
	}
	for id, lsn := range run.acked {
		if lsn < run.cut {
			continue
		}
		if got, ok := seen[id]; !ok || got != lsn {
			t.Fatalf("%s: acknowledged record %d (LSN %d) read at LSN %d (found %v)", where, id, lsn, got, ok)
		}
	}
}
