package wal

import (
	"sync"
	"testing"
	"time"
)

// gatedFsyncs returns faults whose first len(gates) fsyncs each report on
// entered and wait for their gate to be closed before they run.
func gatedFsyncs(entered chan<- int, gates []chan struct{}) faults {
	var mu sync.Mutex
	calls := 0
	return faults{datasync: func(f File) error {
		mu.Lock()
		i := calls
		calls++
		mu.Unlock()
		if i < len(gates) {
			entered <- i
			<-gates[i]
		}
		return f.Datasync()
	}}
}

// holds returns how many times the log's committer held an fsync back.
func holds(l *Log) int {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	return l.c.gathering.holds
}

// waitDurable appends rec with AppendWaiting, waits for it with Wait and
// checks that it is durable; it reports success. It may run in a goroutine
// of the test's.
func waitDurable(t *testing.T, l *Log, rec string) bool {
	t.Helper()
	lsn, c, err := l.AppendWaiting([]byte(rec), false)
	if err == nil {
		err = c.Wait()
	}
	if err != nil {
		t.Errorf("%s: %v", rec, err)
		return false
	}
	if d := l.DurableLSN(); d < lsn {
		t.Errorf("%s: Wait returned for LSN %d with DurableLSN %d", rec, lsn, d)
		return false
	}
	return true
}

// sleepersReach waits until n callers block in Wait for an fsync.
func sleepersReach(t *testing.T, l *Log, n int32) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for l.c.gathering.sleepers.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d callers in Wait, want %d", l.c.gathering.sleepers.Load(), n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestLoneCallerNeverHeld: a caller alone never waits for a gathering,
// whatever it appends: it is the only sleeper when its fsync ends. Nor
// does one that comes after others left and a pause passed.
func TestLoneCallerNeverHeld(t *testing.T) {
	for _, tc := range []struct {
		name string
		step func(t *testing.T, l *Log, i int)
	}{
		{"Append and Wait", func(t *testing.T, l *Log, i int) {
			lsn, c, err := l.Append([]byte("r"))
			if err == nil {
				err = c.Wait()
			}
			if err != nil || l.DurableLSN() < lsn {
				t.Fatalf("Wait = %v, DurableLSN %d < %d", err, l.DurableLSN(), lsn)
			}
		}},
		{"AppendWaiting and Wait", func(t *testing.T, l *Log, i int) {
			if !waitDurable(t, l, "r") {
				t.FailNow()
			}
		}},
		{"lease then ack", func(t *testing.T, l *Log, i int) {
			_, c, err := l.AppendWaiting([]byte("lease"), true)
			if err == nil {
				err = c.WaitWritten()
			}
			if err != nil {
				t.Fatal(err)
			}
			if !waitDurable(t, l, "ack") {
				t.FailNow()
			}
		}},
		{"a group of records, then one", func(t *testing.T, l *Log, i int) {
			if i%2 == 0 {
				for range 4 {
					if _, _, err := l.AppendWaiting([]byte("batch"), false); err != nil {
						t.Fatal(err)
					}
				}
			}
			if !waitDurable(t, l, "r") {
				t.FailNow()
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := open(t.TempDir(), nil, faults{})
			if err != nil {
				t.Fatal(err)
			}
			defer closeOrFail(t, l)
			for i := range 300 {
				tc.step(t, l, i)
			}
			if n := holds(l); n != 0 {
				t.Fatalf("a lone caller was held back %d times", n)
			}
		})
	}
}

// TestLoneCallerAfterACrowd: callers that went away are not waited for by
// a caller that comes after a pause. The pause is made by moving the end
// of the last fsync back, not by sleeping.
func TestLoneCallerAfterACrowd(t *testing.T) {
	l, err := open(t.TempDir(), nil, faults{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeOrFail(t, l)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if !waitDurable(t, l, "crowd") {
					return
				}
			}
		}()
	}
	wg.Wait()
	// The crowd's last fsync may still be on its way back to the committer
	// (its callers return before it is taken back, which sets lastSync):
	// Flush takes it back first.
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.c.mu.Lock()
	l.c.lastSync = l.c.lastSync.Add(-time.Hour)
	l.c.mu.Unlock()
	before := holds(l)
	for range 100 {
		if !waitDurable(t, l, "alone") {
			t.FailNow()
		}
	}
	if n := holds(l) - before; n != 0 {
		t.Fatalf("a lone caller was held back %d times", n)
	}
}

// TestGatherWaitsForReleasedCaller: an fsync that ends with a caller
// waiting for the next one and one it releases holds the next fsync until
// the released caller comes back, and one fsync covers both.
func TestGatherWaitsForReleasedCaller(t *testing.T) {
	entered := make(chan int, 1)
	gate := make(chan struct{})
	l, err := open(t.TempDir(), nil, gatedFsyncs(entered, []chan struct{}{gate}))
	if err != nil {
		t.Fatal(err)
	}
	defer closeOrFail(t, l)
	l.c.mu.Lock()
	l.c.gathering.fixed = time.Hour // the hold lasts until the released caller comes back
	l.c.mu.Unlock()

	var wg sync.WaitGroup
	wg.Add(2)
	back := make(chan struct{})
	go func() { // A: the first fsync's, then comes back once the hold began
		defer wg.Done()
		if waitDurable(t, l, "a1") {
			<-back
			waitDurable(t, l, "a2")
		}
	}()
	<-entered   // the first fsync covers a1 and waits at the gate
	go func() { // B: waits for the next fsync
		defer wg.Done()
		waitDurable(t, l, "b1")
	}()
	sleepersReach(t, l, 2)
	close(gate)
	holdsReach(t, l, 1) // b1 is written and its fsync held for A
	close(back)
	wg.Wait()
	m := l.SyncMetrics()
	if m.Records.Count != 2 || m.Records.Sum != 3 {
		t.Fatalf("%d fsyncs covered %v records, want 2 covering 3 (a1, then a2 and b1)", m.Records.Count, m.Records.Sum)
	}
	if holds(l) == 0 {
		t.Fatal("the second fsync was not held back")
	}
}

// TestGatheringGivesUp: a released caller that does not come back holds
// the next fsync back only for a while, and a caller that arrives during
// a hold that ends in vain (and may leave its group to the gathering) is
// still written and made durable.
func TestGatheringGivesUp(t *testing.T) {
	entered := make(chan int, 2)
	gates := []chan struct{}{make(chan struct{}), make(chan struct{})}
	l, err := open(t.TempDir(), nil, gatedFsyncs(entered, gates))
	if err != nil {
		t.Fatal(err)
	}
	defer closeOrFail(t, l)

	var wg sync.WaitGroup
	run := func(recs ...string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, r := range recs {
				if !waitDurable(t, l, r) {
					return
				}
			}
		}()
	}
	run("a1") // the first fsync's, then goes away
	<-entered
	run("x1", "x2") // x1 and y1 wait for the second fsync
	run("y1")       // and y then goes away
	sleepersReach(t, l, 3)
	close(gates[0]) // the second fsync is held for a1, in vain
	<-entered       // the second fsync (x1, y1) started anyway
	run("z1")
	sleepersReach(t, l, 3)
	close(gates[1]) // released: x (comes back with x2) and y (does not)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("a caller held by a gathering that gave up is still waiting")
	}
	if n := l.SyncMetrics().Records.Sum; n != 5 {
		t.Fatalf("fsyncs covered %v records, want 5", n)
	}
}

// TestLateCallerEndsHold: a caller that arrives once a hold's time is up
// writes and fsyncs the gathered groups itself; it does not wait for the
// committer goroutine's timer (stopped here, so that only the caller can
// end the hold).
func TestLateCallerEndsHold(t *testing.T) {
	entered := make(chan int, 1)
	gate := make(chan struct{})
	l, err := open(t.TempDir(), nil, gatedFsyncs(entered, []chan struct{}{gate}))
	if err != nil {
		t.Fatal(err)
	}
	defer closeOrFail(t, l)
	const hold = 20 * time.Millisecond
	l.c.mu.Lock()
	l.c.gathering.fixed = hold
	l.c.mu.Unlock()

	var wg sync.WaitGroup
	run := func(rec string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			waitDurable(t, l, rec)
		}()
	}
	// Two callers wait for a1, the first fsync's, then go away.
	_, a1, err := l.AppendWaiting([]byte("a1"), false)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a1.Wait(); err != nil {
				t.Error(err)
			}
		}()
	}
	<-entered
	sleepersReach(t, l, 2)
	run("b1") // waits for the second fsync, held for the two
	sleepersReach(t, l, 3)
	close(gate)
	holdsReach(t, l, 1)
	l.c.mu.Lock()
	l.c.timer.Stop()
	l.c.timerOn = false
	l.c.mu.Unlock()
	time.Sleep(2 * hold)
	run("c1") // b and c are two sleepers of three siblings: still short
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("a caller that arrived after the hold's time was left waiting for the timer")
	}
	if m := l.SyncMetrics(); m.Records.Count != 2 || m.Records.Sum != 3 {
		t.Fatalf("%d fsyncs covered %v records, want 2 covering 3 (a1, then b1 c1)", m.Records.Count, m.Records.Sum)
	}
}

// TestGatherWindow pins how long the next fsync may be held back for
// siblings.
func TestGatherWindow(t *testing.T) {
	const us = time.Microsecond
	for _, tc := range []struct {
		name       string
		took, back time.Duration
		want       time.Duration
	}{
		{"nobody held: half the fsync", 100 * us, 0, 50 * us},
		{"siblings back early: still half the fsync", 100 * us, 10 * us, 50 * us},
		{"siblings back late: twice their time", 100 * us, 40 * us, 80 * us},
		{"siblings back later: at most the fsync", 100 * us, 70 * us, 100 * us},
		{"window ran out: it grows, up to the fsync", 100 * us, 50 * us, 100 * us},
		{"slow disk: at most maxGather", 10 * maxGather, 0, maxGather},
		{"slow callers: at most maxGather", 10 * maxGather, 10 * maxGather, maxGather},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := gatherWindow(tc.took, tc.back); got != tc.want {
				t.Fatalf("gatherWindow(%v, %v) = %v, want %v", tc.took, tc.back, got, tc.want)
			}
		})
	}
}

// holdsReach waits until the committer has held an fsync back n times.
func holdsReach(t *testing.T, l *Log, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for holds(l) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d holds, want %d", holds(l), n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func closeOrFail(t *testing.T, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
