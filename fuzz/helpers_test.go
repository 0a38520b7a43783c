package fuzz_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/walq/walq/internal/fakeclock"
	"github.com/walq/walq/internal/seed"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/walq/walq/queue"
)

// scaled returns n, or n/div under the race detector (at least 1).
func scaled(n, div int) int {
	if raceEnabled {
		return max(1, n/div)
	}
	return n
}

// raceThinned returns cases, or under the race detector every third of
// the cases confined to one entry (five kinds per entry, which a stride of
// three takes in turn) and every case that damages a sector or a whole
// segment (a few per sealed segment, each of its own kind): a damage
// sweep's cases each run the same code at another offset, and fuzz/ci.sh
// runs them all without the detector.
func raceThinned(cases []damageCase) []damageCase {
	if !raceEnabled {
		return cases
	}
	var kept []damageCase
	entries := 0
	for _, c := range cases {
		if c.lost != ([2]uint64{}) {
			entries++
			if entries%3 != 1 {
				continue
			}
		}
		kept = append(kept, c)
	}
	return kept
}

// envInt returns the integer in the environment variable name, or def.
func envInt(t testing.TB, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return n
}

// testRand returns a generator seeded from WALQ_SEED or the clock, and logs
// the seed so that a failure can be replayed (package seed).
func testRand(t testing.TB) (*rand.Rand, uint64) {
	t.Helper()
	s := seed.Take(t, "./fuzz")
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15)), s
}

var scratch struct {
	once sync.Once
	base string // "" means the test's temp dir
}

// scratchDir returns a new empty directory for a crash state that is built,
// opened and thrown away. It lives on a tmpfs (/dev/shm, or WALQ_SCRATCH)
// when there is one: the states are built byte by byte, so the disk adds
// nothing but the cost of the drain's fsyncs.
func scratchDir(t testing.TB) string {
	t.Helper()
	scratch.once.Do(func() {
		scratch.base = os.Getenv("WALQ_SCRATCH")
		if scratch.base == "" {
			if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
				scratch.base = "/dev/shm"
			}
		}
		if scratch.base != "" {
			d, err := os.MkdirTemp(scratch.base, "walq-probe-")
			if err != nil {
				scratch.base = ""
				return
			}
			os.RemoveAll(d)
		}
	})
	if scratch.base == "" {
		return t.TempDir()
	}
	d, err := os.MkdirTemp(scratch.base, "walq-fuzz-")
	if err != nil {
		t.Fatalf("scratch dir: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// copyDir copies the files under src to dst (created if needed), leaving
// out the LOCK file: what a kill -9 at this moment leaves on disk.
func copyDir(src, dst string) error {
	return filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case info.IsDir():
			return os.MkdirAll(target, 0o700)
		case rel == "LOCK":
			return nil
		}
		return copyFile(path, target)
	})
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // removed while we copied (a snapshot or segment)
		}
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// readDir returns the contents of every file under dir but LOCK, by path
// relative to dir.
func readDir(dir string) (map[string][]byte, error) {
	out := make(map[string][]byte)
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil // removed while we walked: a compaction is running
		}
		if err != nil || info.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "LOCK" {
			return err
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		out[rel] = b
		return err
	})
	return out, err
}

// quietDir reads dir once it has stopped changing: a background
// compaction may be running, and an open log writes a witness once it
// stays idle after its last write, up to twice the log's witnessBusy
// (128 ms) after a busy spell ends (wal/witness.go). The files must stay
// the same for quietSpan, read every 10ms, within 5s.
func quietDir(dir string) (map[string][]byte, error) {
	imgs, err := quietDirs([]string{dir})
	if err != nil {
		return nil, err
	}
	return imgs[0], nil
}

// quietDirs is quietDir for several directories at once, each of its own
// open queue: they are read in turn every 10ms until each has stayed the
// same for quietSpan, so that the queues' quiet spans pass together.
func quietDirs(dirs []string) ([]map[string][]byte, error) {
	return quietDirsWithin(dirs, quietDeadline)
}

// quietDeadline is how long quietDirs waits for its directories to settle.
const quietDeadline = 5 * time.Second

// quietDirsWithin is quietDirs failing after deadline instead of
// quietDeadline.
func quietDirsWithin(dirs []string, deadline time.Duration) ([]map[string][]byte, error) {
	const quietSpan = 300 * time.Millisecond
	prev := make([]map[string][]byte, len(dirs)) // the first read of each directory's current quiet spell
	cur := make([]map[string][]byte, len(dirs))  // the last read of each directory
	same := make([]time.Time, len(dirs))         // when each directory's quiet spell began
	for i, d := range dirs {
		var err error
		if prev[i], err = readDir(d); err != nil {
			return nil, err
		}
		same[i] = time.Now()
	}
	for end := time.Now().Add(deadline); time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
		quiet := true
		for i, d := range dirs {
			var err error
			if cur[i], err = readDir(d); err != nil {
				return nil, err
			}
			if !sameFiles(prev[i], cur[i]) {
				prev[i], same[i] = cur[i], time.Now()
			}
			quiet = quiet && time.Since(same[i]) >= quietSpan
		}
		if quiet {
			return cur, nil
		}
	}
	for i, d := range dirs {
		if time.Since(same[i]) < quietSpan {
			return nil, fmt.Errorf("%s kept changing for %v", d, deadline)
		}
	}
	return nil, fmt.Errorf("%d directories kept changing for %v", len(dirs), deadline)
}

func sameFiles(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) && !zerosCut(v, w) {
			return false
		}
	}
	return true
}

// zerosCut reports whether w is v without zeros v ended in: the zeros a
// live log writes ahead of its tail, which the log's Open cuts (they
// hold no entry) before the queue's own checks may refuse the directory.
func zerosCut(v, w []byte) bool {
	return len(w) < len(v) && bytes.Equal(v[:len(w)], w) && !slices.ContainsFunc(v[len(w):], func(c byte) bool { return c != 0 })
}

// writeDir creates the files of a directory image under dir.
func writeDir(dir string, files map[string][]byte) error {
	for rel, b := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return err
		}
	}
	return os.MkdirAll(filepath.Join(dir, "log"), 0o700)
}

// payload returns a message body that carries tok, padded to about pad
// bytes with filler that depends on the token.
func payload(tok string, pad int) []byte {
	b := make([]byte, 0, len(tok)+1+pad)
	b = append(b, tok...)
	b = append(b, '|')
	for i := 0; i < pad; i++ {
		b = append(b, 'a'+byte((i+len(tok))%26))
	}
	return b
}

// tokenOf returns the token a payload carries.
func tokenOf(p []byte) string {
	if i := bytes.IndexByte(p, '|'); i >= 0 {
		return string(p[:i])
	}
	return string(p)
}

// futureClock is the system clock moved forward: a drain opens with it so
// that every delay, nack delay and hold has passed.
type futureClock struct{ ahead time.Duration }

func (c futureClock) Now() time.Time                         { return time.Now().Add(c.ahead) }
func (c futureClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// newManualClock returns a clock that moves only when the test advances it.
func newManualClock() *fakeclock.Clock { return fakeclock.New() }

// drainOptions are the options a drain opens a recovered directory with:
// no fsync (nothing the drain writes matters), a clock a day ahead (every
// delay has passed), no automatic requeue and no delivery limit, so that
// the drain itself moves nothing to the dead-letter set.
func drainOptions() queue.Options {
	return queue.Options{
		Sync: queue.SyncNever, Clock: futureClock{24 * time.Hour}, ManualRequeue: true,
		MaxDeliveries: -1, AckTimeout: time.Hour, SnapshotBytes: 1 << 30,
	}
}

// drainOptionsAs are drainOptions with the SegmentSize of the application
// that wrote the directory: the drain then judges a crash state as that
// application's own Open does, as strictly as a read-only open given the
// size (a torn roll at an entry boundary is told from a missing segment
// by it: wal/tornroll.go). Under the default 4 MiB, a full segment of a
// workload with small segments looks short, and a state its own Open
// refuses would be opened.
func drainOptionsAs(segSize int64) queue.Options {
	o := drainOptions()
	o.SegmentSize = segSize
	return o
}

// drained is what a full drain of a queue directory returned.
type drained struct {
	tokens   []string            // every message, dead letters included, in delivery order
	payloads [][]byte            // their payloads, in the same order
	headers  []map[string]string // their headers, in the same order, where a drain reads them
	recovery queue.Recovery      // what Open found
	open     time.Duration       // wall time of Open
}

// drainQueue opens the ack queue in dir, ends its leases, requeues its dead
// letters and leases every message; it returns their tokens.
func drainQueue(dir string) (drained, error) { return drainWith(dir, drainOptions()) }

// drainWith is drainQueue with the options o.
func drainWith(dir string, o queue.Options) (drained, error) {
	var d drained
	start := time.Now()
	q, err := queue.Open(dir, &o)
	if err != nil {
		return d, err
	}
	d.open, d.recovery = time.Since(start), q.Recovery()
	// Leases that survived a clean Close have run out by the drain's clock.
	if _, err := q.RequeueExpired(); err != nil {
		q.Close()
		return d, err
	}
	if _, err := q.RequeueAllDead(); err != nil {
		q.Close()
		return d, err
	}
	// Stats says whether anything is ready; a DequeueBatch that then
	// blocks means the counts are wrong, which the timeout reports.
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	for q.Stats().Ready > 0 {
		ms, err := q.DequeueBatch(ctx, 4096)
		if err != nil {
			q.Close()
			return d, fmt.Errorf("drain with %d ready: %w", q.Stats().Ready, err)
		}
		for _, m := range ms {
			d.tokens = append(d.tokens, tokenOf(m.Payload))
			d.payloads = append(d.payloads, m.Payload)
		}
	}
	if _, err := q.TryDequeue(); !errors.Is(err, queue.ErrEmpty) {
		q.Close()
		return d, fmt.Errorf("drain: Stats says nothing is ready, TryDequeue says %v", err)
	}
	return d, q.Close()
}

// drainTimeout bounds a drain; only an engine bug makes one block.
const drainTimeout = 30 * time.Second

// drainSorted opens the sorted queue in dir and pulls every value; it
// returns their tokens.
func drainSorted(dir string) (drained, error) { return drainSortedWith(dir, drainOptions()) }

// drainSortedWith is drainSorted with the options o.
func drainSortedWith(dir string, o queue.Options) (drained, error) {
	var d drained
	start := time.Now()
	s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: o})
	if err != nil {
		return d, err
	}
	d.open, d.recovery = time.Since(start), s.Recovery()
	if _, err := s.RequeueExpired(); err != nil {
		s.Close()
		return d, err
	}
	for {
		bs, err := s.TryPull(1024)
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		if err != nil {
			s.Close()
			return d, err
		}
		for _, b := range bs {
			for _, v := range b.Values {
				d.tokens = append(d.tokens, tokenOf(v.Payload))
				d.payloads = append(d.payloads, v.Payload)
			}
		}
	}
	return d, s.Close()
}

// mustEnqueue enqueues payload or fails the test.
func mustEnqueue(t testing.TB, q *queue.Queue, p []byte, opts ...queue.EnqueueOption) string {
	t.Helper()
	id, err := q.Enqueue(context.Background(), p, opts...)
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	return id
}

// mustOpen opens a queue or fails the test.
func mustOpen(t testing.TB, dir string, o *queue.Options) *queue.Queue {
	t.Helper()
	q, err := queue.Open(dir, o)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return q
}

// percentile returns the p-th percentile (0..100) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}

// failOracle fails the test with the oracle's result if it did not pass.
func failOracle(t testing.TB, what string, r interface {
	OK() bool
	String() string
}) {
	t.Helper()
	if !r.OK() {
		t.Fatalf("%s: %s", what, r.String())
	}
}

// describe names a crash state in failure messages.
func describe(parts ...any) string { return fmt.Sprint(parts...) }
