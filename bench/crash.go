package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// The crash workload measures the time a store takes to open after its
// process was killed (kill -9) with a log that no snapshot or clean close
// has summed up: what a restart after a crash costs, not a restart after a
// clean shutdown (the recovery workload).
//
// Every round, for each system in the round's shuffled order:
//
//  1. build (untimed): a child process (`bench child grow -kill`) enqueues
//     Size bytes of messages into a fresh store with recoveryProducers
//     goroutines, reports what each producer was told was stored, and kills
//     itself with SIGKILL without closing the store. walq's Size is chosen
//     below its default SnapshotBytes (64 MiB of log), so no snapshot was
//     taken: the open replays the whole log, the most it ever replays with
//     the default options;
//  2. open (timed): the store itself, as the crash left it, is opened at
//     once, up to the first delivery, which is checked and counted;
//  3. verify (untimed): the store is drained, every message a producer was
//     told was stored must come out, and the store is removed.
//
// The store is not copied: a copy leaves every page of it dirty in the page
// cache, where a crash leaves dirty only what the process had not fsynced.
// A system that fsyncs its recovered log at open (walq: sealed segments)
// would then write the whole store to disk in the timed open, a cost no
// crash makes it pay. The page cache is warm, as after the kill.

// replayReporter is implemented by systems that say what their open
// replayed (walq: queue.Recovery).
type replayReporter interface {
	// replayed returns a note on what the last open replayed, and whether
	// it found the store closed cleanly.
	replayed() (note string, clean bool)
}

// buildCrashed returns the builder of the crash workload; exe is this
// program, growCap bounds the child's growth.
func (m *matrix) buildCrashed(exe string, growCap time.Duration) storeBuilder {
	return func(ctx context.Context, s System, c cell) (*recoveryStore, error) {
		st, err := m.newStore(s, c)
		if err != nil {
			return st, err
		}
		st.crashed = true
		rep, err := runChild(ctx, exe, []string{"grow", "-kill", "-time", growCap.String(), "-system", s.Name,
			"-dir", st.dir, "-payload", strconv.Itoa(c.Payload), "-size", strconv.FormatInt(c.Size, 10)})
		if err != nil {
			return st, err
		}
		st.chk.expect(rep.Counts)
		for _, n := range rep.Counts {
			st.left += n
		}
		m.logf("%-28s build  %-17s %d messages, %s on disk, killed", c, s.Name, st.left, sizeString(diskUsage(st.dir)))
		return st, nil
	}
}

// runCrash runs the crash workload for cell c: every round builds, with
// build, a crashed store of each system in turn and times its first open.
func (m *matrix) runCrash(ctx context.Context, c cell, build storeBuilder) []Result {
	var systems []System
	for _, s := range m.systems {
		if applies(s, c.Workload) {
			systems = append(systems, s)
		}
	}
	rounds := make(map[string][][]sample)
	for r := range m.rounds {
		for _, i := range m.order.next(len(systems)) {
			s := systems[i]
			smp := m.crashOnce(ctx, s, c, build)
			rounds[s.Name] = append(rounds[s.Name], []sample{smp})
			m.logf("%-28s round %d/%d  %-17s open %v (%s) %s", c, r+1, m.rounds, s.Name,
				smp.Open.Round(time.Microsecond), sizeString(smp.Disk), smp.Note)
		}
	}
	var perSystem [][]Result
	for _, s := range systems {
		perSystem = append(perSystem, aggregate(s, c, rounds[s.Name], rounds[reference(s, c.Workload)]))
	}
	return phaseMajor(perSystem)
}

// crashOnce builds a crashed store of s, times its first open, then drains,
// verifies and removes it. The sample carries every error of the three.
func (m *matrix) crashOnce(ctx context.Context, s System, c cell, build storeBuilder) sample {
	st, err := build(ctx, s, c)
	if st == nil {
		m.logf("%-28s build  %-17s failed: %v", c, s.Name, err)
		return sample{Disk: -1, Errors: []string{fmt.Sprintf("build: %v", err)}}
	}
	defer os.RemoveAll(filepath.Dir(st.dir))
	if err != nil {
		st.errs.add("build", err)
	}
	smp := st.openOnce(ctx, c)
	st.verify(ctx, m.opts.Idle)
	smp.Errors = append(append(smp.Errors, st.errs.list()...), st.chk.problems()...)
	return smp
}

// crashNote returns what q's open replayed, and an error when it found a
// clean close: then the round measured no recovery after a crash.
func crashNote(q Queue) (string, []string) {
	r, ok := q.(replayReporter)
	if !ok {
		return "", nil
	}
	note, clean := r.replayed()
	if clean {
		return note, []string{"the open after the kill found a clean close"}
	}
	return note, nil
}
