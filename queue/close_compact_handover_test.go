package queue_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// compactPause holds a compaction at its k-th change of the directory:
// the k-th change made by a goroutine that runs a compaction (Compact's
// caller or the housekeeper's), counted from when the pause is made. The
// writes of the copies a compaction appends are the committer's, not
// counted; its snapshot files, its truncation's removals, directory
// fsyncs and closes are.
type compactPause struct {
	k       int           // the change held, counting from 1
	reached chan struct{} // closed when the k-th change arrives
	resume  chan struct{} // closed by the test to let it, and every later one, through

	mu   sync.Mutex // guards seen and op
	seen int        // changes a compaction made so far
	op   string     // the change held
}

// newCompactPause returns a pause at the k-th change.
func newCompactPause(k int) *compactPause {
	return &compactPause{k: k, reached: make(chan struct{}), resume: make(chan struct{})}
}

// before is handoverFS.before: it counts the compaction's changes and
// holds the k-th until resume is closed.
func (p *compactPause) before(op string) {
	if !inCompaction() {
		return
	}
	p.mu.Lock()
	p.seen++
	held := p.seen == p.k
	if held {
		p.op = op
	}
	p.mu.Unlock()
	if held {
		close(p.reached)
		<-p.resume
	}
}

// held returns the change the pause held.
func (p *compactPause) held() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.op
}

// inCompaction reports whether the calling goroutine runs a compaction.
func inCompaction() bool {
	buf := make([]byte, 64<<10)
	return strings.Contains(string(buf[:runtime.Stack(buf, false)]), "queue.(*Queue).compact(")
}

// closeParked reports whether a goroutine in Queue.Close is asleep on a
// lock or a wait group: where Close waits for a compaction under way
// (its housekeeper's, or the compaction lock).
func closeParked() bool {
	buf := make([]byte, 4<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		head, _, _ := strings.Cut(g, "\n")
		if !strings.Contains(g, "queue.(*Queue).Close(") || strings.Contains(head, "running") || strings.Contains(head, "runnable") {
			continue
		}
		if strings.Contains(g, "sync.(*Mutex).Lock") || strings.Contains(g, "sync.(*WaitGroup).Wait") {
			return true
		}
	}
	return false
}

// closeDuringCompaction holds a compaction at a change, starts closeFn
// (the queue's Close) while it is held, and lets the compaction go on
// once Close waits for it. Close must not return while the compaction
// is held: the held change, and those after it, would be made after
// Close released the directory. It returns Close's error.
func closeDuringCompaction(t *testing.T, p *compactPause, fs *handoverFS, closeFn func() error) error {
	t.Helper()
	fs.watch(true)
	defer fs.watch(false)
	closed := make(chan error, 1)
	go func() { closed <- closeFn() }()
	var early error
	returned := false
	require.Eventually(t, func() bool {
		select {
		case early = <-closed:
			returned = true
			return true
		default:
			return closeParked()
		}
	}, 10*time.Second, time.Millisecond, "Close neither returned nor waited for the compaction held at %q", p.held())
	close(p.resume)
	if returned {
		t.Fatalf("Close returned (%v) while a compaction was held at %q: it makes that change after the directory was released", early, p.held())
	}
	select {
	case err := <-closed:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("Close did not return once the compaction held at %q went on", p.held())
		return nil
	}
}

// TestCloseWaitsForCompaction: Close called while a compaction is under
// way, held at any one of its changes (its snapshot's file written,
// fsynced, renamed, the directory fsynced, the log's segments removed
// behind it, their files closed, its second snapshot after copying old
// messages forward), returns only once that compaction stopped changing
// the directory: a process waiting on LockTimeout never opens the
// directory while the compaction still writes, renames or removes, and
// the next Open delivers exactly the messages never acked, with their
// payloads. It holds for an explicit Compact and for the compaction the
// housekeeper runs as SnapshotBytes fills, for ack and sorted queues
// (a windowed queue is a sorted one: the same compaction).
//
// Under the race detector it tries every third change only, each case
// from another first one (a full sweep takes some 50 s there); test.sh
// runs the full sweep without it.
func TestCloseWaitsForCompaction(t *testing.T) {
	step := 1
	if raceEnabled {
		step = 3
	}
	c := 0
	for _, kind := range []string{"ack", "sorted"} {
		for _, auto := range []bool{false, true} {
			name := kind + "/Compact"
			if auto {
				name = kind + "/housekeeper"
			}
			first := 1 + c%step
			c++
			t.Run(name, func(t *testing.T) {
				tried := 0
				for k := first; ; k += step {
					if !closeAtCompactionChange(t, kind, auto, k) {
						require.NotZero(t, tried, "no change was seen as a compaction's: nothing was checked")
						t.Logf("Close tried at %d changes, one in %d, of a compaction that makes fewer than %d", tried, step, k)
						return
					}
					tried++
					if auto && k+step > 24 { // the housekeeper compacts on; its k-th change lands in one of several passes
						return
					}
				}
			})
		}
	}
}

// closeAtCompactionChange runs one case: a queue whose log an old leased
// message pins (so a compaction copies it forward), a compaction held at
// its k-th change, and Close. It reports whether the compaction reached
// its k-th change (an explicit Compact that ends sooner: no).
func closeAtCompactionChange(t *testing.T, kind string, auto bool, k int) bool {
	t.Helper()
	dir := t.TempDir()
	p := newCompactPause(k)
	fs := &handoverFS{dir: dir, before: p.before}
	opts := queue.Options{FS: fs, SegmentSize: 4096, AckTimeout: time.Minute, Clock: newFakeClock(), Sync: queue.SyncNever}
	if auto {
		opts.SnapshotBytes = 1 // every append makes a compaction due
	} else {
		testhook.SetManualCompaction(&opts)
	}
	var w handoverWorkload
	if kind == "ack" {
		w = newAckWorkload(t, dir, fs, &opts)
	} else {
		w = newSortedWorkload(t, dir, fs, &opts)
	}
	want := w.fill(t)
	compacted := make(chan error, 1)
	if auto {
		for i := 0; !isClosed(p.reached); i++ { // the housekeeper compacts as the appends go on
			require.Less(t, i, 10000, "the housekeeper made no %d changes of compactions", k)
			want = append(want, w.add(t, fmt.Sprintf("extra %d", i)))
		}
	} else {
		go func() { compacted <- w.compact() }()
		select {
		case err := <-compacted:
			require.NoError(t, err)
			require.NoError(t, w.close())
			return false
		case <-p.reached:
		}
	}
	err := closeDuringCompaction(t, p, fs, w.close)
	require.NoError(t, err, "Close while a compaction was held at %q", p.held())
	if !auto {
		if err := <-compacted; err != nil && !errors.Is(err, queue.ErrClosed) {
			t.Fatalf("Compact beside Close, held at %q: %v", p.held(), err)
		}
	}
	fs.requireHeld(t, "Close with a compaction held at "+p.held())
	require.ElementsMatch(t, want, w.drain(t), "reopened after Close with a compaction held at %q", p.held())
	return true
}

// isClosed reports whether ch is closed.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// handoverWorkload is one kind of queue under TestCloseWaitsForCompaction.
type handoverWorkload interface {
	fill(t *testing.T) []string        // an old message leased, many acked, a few left; returns what is unacked
	add(t *testing.T, s string) string // adds s, unacked; returns what drain will find for it
	compact() error
	close() error
	drain(t *testing.T) []string // reopens (real clock: every lease long over), takes all, closes
}

// ackWorkload is an ack queue's.
type ackWorkload struct {
	dir string
	q   *queue.Queue
}

// newAckWorkload opens an ack queue in dir with opts; fs's probes open it
// as one.
func newAckWorkload(t *testing.T, dir string, fs *handoverFS, opts *queue.Options) *ackWorkload {
	fs.open = func() (io.Closer, error) { return queue.Open(dir, nil) }
	return &ackWorkload{dir: dir, q: open(t, dir, opts)}
}

func (w *ackWorkload) fill(t *testing.T) []string {
	want := []string{w.add(t, "old")}
	tryDequeue(t, w.q) // leased: it pins the log's front
	for i := range 60 {
		enqueue(t, w.q, fmt.Sprintf("acked %d %s", i, strings.Repeat("x", 100)))
		require.NoError(t, tryDequeue(t, w.q).Ack())
	}
	for i := range 5 {
		want = append(want, w.add(t, fmt.Sprintf("kept %d", i)))
	}
	return want
}

func (w *ackWorkload) add(t *testing.T, s string) string { enqueue(t, w.q, s); return s }
func (w *ackWorkload) compact() error                    { return w.q.Compact() }
func (w *ackWorkload) close() error                      { return w.q.Close() }

func (w *ackWorkload) drain(t *testing.T) []string {
	q := open(t, w.dir, nil)
	defer func() { require.NoError(t, q.Close()) }()
	_, err := q.RequeueExpired()
	require.NoError(t, err)
	var got []string
	for {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			return got
		}
		require.NoError(t, err)
		got = append(got, string(m.Payload))
		require.NoError(t, m.Ack())
	}
}

// sortedWorkload is a sorted queue's: one value per key, the key named
// after the value.
type sortedWorkload struct {
	dir  string
	s    *queue.Sorted[int]
	sort int // the next value's sort key
}

// newSortedWorkload opens a sorted queue in dir with opts; fs's probes
// open it as one.
func newSortedWorkload(t *testing.T, dir string, fs *handoverFS, opts *queue.Options) *sortedWorkload {
	fs.open = func() (io.Closer, error) { return queue.OpenSorted[int](dir, nil) }
	s, err := queue.OpenSorted[int](dir, &queue.SortedOptions{Options: *opts})
	require.NoError(t, err)
	return &sortedWorkload{dir: dir, s: s}
}

func (w *sortedWorkload) fill(t *testing.T) []string {
	want := []string{w.add(t, "old")}
	bs, err := w.s.TryPull(1) // leased: it pins the log's front
	require.NoError(t, err)
	require.Len(t, bs, 1)
	for i := range 60 {
		w.add(t, fmt.Sprintf("acked %d", i))
		bs, err := w.s.TryPull(1)
		require.NoError(t, err)
		require.Len(t, bs, 1)
		require.NoError(t, bs[0].Ack())
	}
	for i := range 5 {
		want = append(want, w.add(t, fmt.Sprintf("kept %d", i)))
	}
	return want
}

func (w *sortedWorkload) add(t *testing.T, s string) string {
	w.sort++
	require.NoError(t, w.s.Publish(context.Background(), w.sort, s, []byte(s+" "+strings.Repeat("x", 100))))
	return s + " = " + s + " " + strings.Repeat("x", 100)
}

func (w *sortedWorkload) compact() error { return w.s.Compact() }
func (w *sortedWorkload) close() error   { return w.s.Close() }

func (w *sortedWorkload) drain(t *testing.T) []string {
	s, err := queue.OpenSorted[int](w.dir, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	_, err = s.RequeueExpired()
	require.NoError(t, err)
	var got []string
	for {
		bs, err := s.TryPull(100)
		if errors.Is(err, queue.ErrEmpty) {
			return got
		}
		require.NoError(t, err)
		for _, b := range bs {
			for _, p := range b.Payloads() {
				got = append(got, b.Key+" = "+string(p))
			}
			require.NoError(t, b.Ack())
		}
	}
}
