package main

import (
	"context"
	"os"
	"path/filepath"
	"time"
)

// The recovery workload measures the time a store takes to open, against
// the size of the log it holds:
//
//  1. build: for each system, enqueue Size bytes of messages into a fresh
//     store (recoveryProducers goroutines, not timed) and close it;
//  2. rounds: open every store in turn, in a shuffled order each round, timing the open up to
//     the first delivery (stores that defer work to the first read pay it
//     there), ack that message, close;
//  3. verify: open each store once more and drain it, checking every message.
//
// The page cache is warm: the harness never drops it.
const recoveryProducers = 16

// recoveryStore is one system's store across the rounds.
type recoveryStore struct {
	s   System
	dir string
	// crashed marks a store whose process was killed (the crash workload):
	// its open must not find a clean close.
	crashed bool
	chk     *checker
	first   *view      // checks the first message of each round
	left    int64      // messages still in the store
	rounds  [][]sample // one sample per round
	errs    errorLog
}

// storeBuilder fills a fresh store of system s for cell c; it returns nil
// when no store could be made.
type storeBuilder func(ctx context.Context, s System, c cell) (*recoveryStore, error)

// runRecovery runs the recovery workload for cell c: its stores are built
// once and opened in every round (the crash workload, crash.go, builds a
// store per round instead, since an open after a crash repairs the store).
func (m *matrix) runRecovery(ctx context.Context, c cell, build storeBuilder) []Result {
	var stores []*recoveryStore
	for _, s := range m.systems {
		if !applies(s, c.Workload) {
			continue
		}
		st, err := build(ctx, s, c)
		if st == nil {
			m.logf("%-28s build  %-17s failed: %v", c, s.Name, err)
			continue
		}
		defer os.RemoveAll(filepath.Dir(st.dir))
		if err != nil {
			st.errs.add("build", err)
		}
		stores = append(stores, st)
	}
	for r := range m.rounds {
		for _, i := range m.order.next(len(stores)) {
			st := stores[i]
			smp := st.openOnce(ctx, c)
			st.rounds = append(st.rounds, []sample{smp})
			m.logf("%-28s round %d/%d  %-17s open %v (%s) %s", c, r+1, m.rounds, st.s.Name,
				smp.Open.Round(time.Microsecond), sizeString(smp.Disk), smp.Note)
		}
	}
	byName := make(map[string][][]sample)
	for _, st := range stores {
		st.verify(ctx, m.opts.Idle)
		last := &st.rounds[len(st.rounds)-1][0]
		last.Errors = append(append(last.Errors, st.errs.list()...), st.chk.problems()...)
		byName[st.s.Name] = st.rounds
	}
	var perSystem [][]Result
	for _, st := range stores {
		perSystem = append(perSystem, aggregate(st.s, c, st.rounds, byName[reference(st.s, c.Workload)]))
	}
	return phaseMajor(perSystem)
}

// newStore makes an empty directory for s's store and the checker of what
// it will hold.
func (m *matrix) newStore(s System, c cell) (*recoveryStore, error) {
	dir, err := os.MkdirTemp(m.base, c.Workload+"-")
	if err != nil {
		return nil, err
	}
	st := &recoveryStore{s: s, dir: filepath.Join(dir, "store")}
	per := perProducer(int(c.Size/int64(c.Payload)), recoveryProducers)
	st.chk = newChecker(recoveryProducers, per, c.Payload, s.FIFO)
	st.chk.expect(make([]int64, recoveryProducers))
	st.first = st.chk.view()
	return st, os.Mkdir(st.dir, 0o700)
}

// buildClosed returns the builder of the recovery workload: the store is
// filled in this process, for at most buildCap, and closed cleanly.
func (m *matrix) buildClosed(buildCap time.Duration) storeBuilder {
	return func(ctx context.Context, s System, c cell) (*recoveryStore, error) {
		return m.buildStore(ctx, s, c, buildCap)
	}
}

func (m *matrix) buildStore(ctx context.Context, s System, c cell, buildCap time.Duration) (*recoveryStore, error) {
	st, err := m.newStore(s, c)
	if err != nil {
		return st, err
	}
	q, err := s.Open(st.dir, Hint{Producers: recoveryProducers, Payload: c.Payload})
	if err != nil {
		return st, err
	}
	stop, cancel := stopAfter(buildCap)
	defer cancel()
	prod := produce(ctx, q, recoveryProducers, int(c.Size/int64(c.Payload)), c.Payload, stop, &st.errs)
	settle(ctx, q, &st.errs)
	st.chk.expect(prod.counts)
	st.left = prod.total()
	m.logf("%-28s build  %-17s %d messages, %s on disk", c, s.Name, st.left, sizeString(diskUsage(st.dir)))
	return st, q.Close()
}

// openOnce times one open of the store up to the first delivery, which it
// checks and counts, then closes the store.
func (st *recoveryStore) openOnce(ctx context.Context, c cell) sample {
	out := sample{Ops: st.left, Disk: diskUsage(st.dir)}
	start := time.Now()
	q, err := st.s.Open(st.dir, Hint{Consumers: 1, Payload: c.Payload})
	if err != nil {
		st.errs.add("open", err)
		return out
	}
	if st.left > 0 {
		firstMessage(ctx, q, st.first, 10*time.Second, &st.errs)
		st.left--
	}
	out.Open = time.Since(start)
	out.Elapsed = out.Open
	if st.crashed {
		out.Note, out.Errors = crashNote(q)
	}
	if err := q.Close(); err != nil {
		st.errs.add("close", err)
	}
	return out
}

// verify drains what the rounds left and checks every message, through
// the system of the family that reads the store fastest.
func (st *recoveryStore) verify(ctx context.Context, idle time.Duration) {
	q, err := readerOf(st.s).Open(st.dir, Hint{Consumers: verifyConsumers, Payload: st.chk.payload})
	if err != nil {
		st.errs.add("verify open", err)
		return
	}
	drainAll(ctx, q, verifyConsumers, st.chk, st.left, idle, &st.errs)
	if err := q.Close(); err != nil {
		st.errs.add("verify close", err)
	}
}
