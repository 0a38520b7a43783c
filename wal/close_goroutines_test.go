package wal

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walq/walq/internal/leakcheck"
)

const walPkg = "github.com/walq/walq/wal"

// logGoroutines returns the stacks of the running goroutines, other than
// the caller's, with a frame of this package that is not a test's (the
// test binary's main goroutine, in TestMain, and a test waiting for its
// subtests are not a log's), but for the committer of a closed log
// returning.
func logGoroutines() string {
	var b strings.Builder
	for _, g := range leakcheck.Running(walPkg) {
		if leakcheck.InTest(g) || returning(g) {
			continue
		}
		b.WriteString("--- " + g.Func + "\n" + g.Stack + "\n\n")
	}
	return b.String()
}

// returning reports whether g is the committer goroutine of a closed log
// ending: Close waits for its last act, a channel close, after which it
// only returns, and may be seen doing so (runnable or running: not
// blocked). A goroutine cannot signal that it has returned. The other
// goroutines of a log (the syncer, the write-back goroutine) have no such
// leeway: the committer waits for them before its last steps.
func returning(g leakcheck.Goroutine) bool {
	header, _, _ := strings.Cut(g.Stack, "\n")
	return strings.HasPrefix(g.Func, walPkg+".(*committer).run(") &&
		(strings.Contains(header, "[runnable") || strings.Contains(header, "[running"))
}

// awaitNoLogGoroutines waits, up to leakcheck.Grace, until no goroutine of
// a log runs, so that a check made right after a Close sees only what that
// Close left.
func awaitNoLogGoroutines(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(leakcheck.Grace)
	for {
		left := logGoroutines()
		if left == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines of a log are still running before the test opened one:\n%s", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// requireNoLogGoroutines fails the test if any goroutine of a log is
// running: called right after Close returned, with no grace.
func requireNoLogGoroutines(t *testing.T, after string) {
	t.Helper()
	if left := logGoroutines(); left != "" {
		t.Fatalf("goroutines of the log still running right after %s returned:\n%s", after, left)
	}
}

// closeRounds is how many logs each case opens and closes.
const closeRounds = 10

// TestCloseWaitsForGoroutines: when Close returns, every goroutine the
// Log started (the committer, the syncer, the write-back goroutine) has
// returned, in every sync mode, and also when a failed fsync or
// write-back poisoned the Log first, so that Close returns its error.
//
// It runs on one processor: a goroutine that the log's last steps wake
// then runs only once Close's caller parks, so one that Close does not
// wait for is seen every time, not only when the other processors are
// busy.
func TestCloseWaitsForGoroutines(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	awaitNoLogGoroutines(t)
	for _, c := range []struct {
		name string
		opts Options
		kind string // the disk operation that fails (failingFaults, or "write-back"), "" for none
	}{
		{name: "SyncAlways", opts: Options{Sync: SyncAlways}},
		{name: "SyncInterval", opts: Options{Sync: SyncInterval, SyncInterval: time.Millisecond}},
		{name: "SyncNever", opts: Options{Sync: SyncNever}},
		{name: "SyncAlways fsync fails", opts: Options{Sync: SyncAlways}, kind: "fsync"},
		{name: "SyncInterval fsync fails", opts: Options{Sync: SyncInterval, SyncInterval: time.Millisecond}, kind: "fsync"},
		{name: "SyncNever write-back fails", opts: Options{Sync: SyncNever, SegmentSize: 1 << 20}, kind: "write-back"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for range closeRounds {
				closeAndCheck(t, c.opts, c.kind)
			}
		})
	}
}

// closeAndCheck opens a log with opts, appends, makes the disk operation
// kind fail if not "", closes the log and requires that none of its
// goroutines runs.
func closeAndCheck(t *testing.T, opts Options, kind string) {
	t.Helper()
	var on atomic.Bool
	f := failingFaults(&on, kind)
	if kind == "write-back" {
		f.writeback = func(File, int64, int64) (bool, error) {
			if on.Load() {
				return true, errInjected
			}
			return true, nil
		}
	}
	l, err := open(t.TempDir(), &opts, f)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeKiB(l, 64); err != nil {
		t.Fatal(err)
	}
	if kind != "" {
		on.Store(true)
		poisonBy(t, l, kind)
	}
	err = l.Close()
	requireNoLogGoroutines(t, "Close")
	switch {
	case kind == "" && err != nil:
		t.Fatalf("Close = %v", err)
	case kind != "" && !errors.Is(err, errInjected):
		t.Fatalf("Close of a poisoned log = %v, want the injected error", err)
	}
}

// poisonBy makes the failing operation kind run and waits until it
// poisoned the Log: an fsync (the syncer's or a caller's under
// SyncAlways, the committer's at a Flush or a tick otherwise) or a
// write-back hint (the write-back goroutine's, once writebackBytes more
// are written).
func poisonBy(t *testing.T, l *Log, kind string) {
	t.Helper()
	var err error
	if kind == "write-back" {
		err = writeKiB(l, int(2*writebackBytes>>10)) // fails once the hint's failure poisoned the Log
	} else {
		_, c, aerr := l.Append([]byte("after"))
		if aerr == nil {
			aerr = c.Wait()
		}
		err = errors.Join(aerr, l.Flush())
	}
	select {
	case <-l.Poisoned():
	case <-time.After(10 * time.Second):
		t.Fatalf("the failing %s did not poison the log (%v)", kind, err)
	}
}

// TestSecondCloseWaitsForGoroutines: a Close called while another Close
// is still shutting the Log down (here, blocked in its last fsync)
// returns ErrClosed only once every goroutine of the Log has returned, as
// the first one does.
func TestSecondCloseWaitsForGoroutines(t *testing.T) {
	awaitNoLogGoroutines(t)
	var hold atomic.Bool
	var once sync.Once
	entered, release := make(chan struct{}), make(chan struct{})
	f := faults{datasync: func(file File) error {
		if hold.Load() {
			once.Do(func() { close(entered) })
			<-release
		}
		return file.Sync()
	}}
	l, err := open(t.TempDir(), &Options{Sync: SyncNever}, f)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeKiB(l, 8); err != nil {
		t.Fatal(err)
	}
	hold.Store(true)
	first := make(chan error, 1)
	go func() { first <- l.Close() }()
	<-entered // the first Close's last fsync is running
	time.AfterFunc(50*time.Millisecond, func() { close(release) })
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v, want ErrClosed", err)
	}
	var left strings.Builder
	for _, g := range leakcheck.Running(walPkg) {
		// The committer blocked in the fsync has the test's fault as its
		// innermost frame: the Log's goroutines are told by their
		// committer frames. The first Close's caller may still be
		// finishing its call: it is not a goroutine of the Log.
		if !strings.Contains(g.Stack, walPkg+".(*committer).") || returning(g) {
			continue
		}
		left.WriteString("--- " + g.Func + "\n" + g.Stack + "\n\n")
	}
	if left.Len() > 0 {
		t.Fatalf("goroutines of the log still running right after the second Close returned:\n%s", left.String())
	}
	if err := <-first; err != nil {
		t.Fatalf("first Close = %v", err)
	}
}
