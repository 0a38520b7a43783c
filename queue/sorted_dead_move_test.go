package queue_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/wal"
)

// TestDeadValuesWhileCopiedForward: Sorted.DeadValues reads each dead
// value's payload where the index said it was when the call began; a
// compaction that copies the dead values forward and cuts the log behind
// them in the meantime made the read fail ("record not in log"), where
// the ack queue's DeadLetters follows the copy. The test holds
// DeadValues's first read of the log at the file system until the
// compaction is done.
func TestDeadValuesWhileCopiedForward(t *testing.T) {
	fsys := &gateFS{}
	s := openUncachedSorted(t, fsys)
	defer s.Close()
	ctx := context.Background()
	want := make(map[int64]string)
	for i := range int64(3) {
		want[i] = fmt.Sprintf("dead%d|%s", i, bytes.Repeat([]byte("d"), 900))
		require.NoError(t, s.Publish(ctx, i, "dead", []byte(want[i])))
	}
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.NoError(t, bs[0].Nack(0)) // one delivery: the values go dead
	// Other values pass through: the log outgrows the bound, so the next
	// compaction copies the dead values forward, and their reads fill the
	// log's entry cache, so the dead values are read from the file.
	for i := range 12 {
		require.NoError(t, s.Publish(ctx, 100, fmt.Sprint("busy", i), bytes.Repeat([]byte("b"), 3000)))
		bs, err := s.TryPull(10)
		require.NoError(t, err)
		require.NoError(t, bs[0].Ack())
	}

	released := fsys.holdNextRead()
	type result struct {
		ds  []queue.DeadValue[int64]
		err error
	}
	done := make(chan result, 1)
	go func() {
		ds, err := s.DeadValues(0, 0)
		done <- result{ds, err}
	}()
	select {
	case <-fsys.held:
	case r := <-done:
		t.Fatalf("DeadValues read nothing from the log file (%d values, %v)", len(r.ds), r.err)
	case <-time.After(10 * time.Second):
		t.Fatal("DeadValues never read the log")
	}
	first := s.Stats().Segments[0].FirstLSN
	require.NoError(t, s.Compact())
	st := s.Stats()
	require.Greater(t, st.Segments[0].FirstLSN, first, "the compaction did not cut the log behind the dead values")
	require.GreaterOrEqual(t, st.Moved, uint64(3), "the compaction did not copy the dead values forward")
	close(released)

	r := <-done
	require.NoError(t, r.err)
	require.Len(t, r.ds, 3)
	for _, d := range r.ds {
		require.Equal(t, want[d.Sort], string(d.Payload), "value at sort key %d", d.Sort)
	}
}

// gateFS is the real file system, but it can hold one read of a log
// segment until the test releases it.
type gateFS struct {
	wal.OSFS
	mu      sync.Mutex
	release chan struct{} // the next segment read waits for it to close; nil: none is held
	held    chan struct{} // closed once that read waits
	fail    error         // the next segment read fails with it; nil: none fails
}

// failNextRead makes the next read of a segment file fail with err.
func (g *gateFS) failNextRead(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fail = err
}

// failure returns the error the next read is to fail with, once.
func (g *gateFS) failure() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	err := g.fail
	g.fail = nil
	return err
}

// holdNextRead makes the next read of a segment file wait until the
// returned channel is closed.
func (g *gateFS) holdNextRead() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.release, g.held = make(chan struct{}), make(chan struct{})
	return g.release
}

// wait holds the caller if a read is to be held, once.
func (g *gateFS) wait() {
	g.mu.Lock()
	release, held := g.release, g.held
	g.release = nil
	g.mu.Unlock()
	if release != nil {
		close(held)
		<-release
	}
}

func (g *gateFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	f, err := g.OSFS.OpenFile(name, flag, perm)
	return g.wrap(name, f), err
}

func (g *gateFS) Open(name string) (wal.File, error) {
	f, err := g.OSFS.Open(name)
	return g.wrap(name, f), err
}

func (g *gateFS) wrap(name string, f wal.File) wal.File {
	if f == nil || filepath.Base(filepath.Dir(name)) != "log" {
		return f
	}
	return gateFile{File: f, g: g}
}

// gateFile is a segment file whose ReadAt the gate may hold.
type gateFile struct {
	wal.File
	g *gateFS
}

func (f gateFile) ReadAt(p []byte, off int64) (int, error) {
	f.g.wait()
	if err := f.g.failure(); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

// TestSortedRequeueAllDeadWhileCopiedForward: RequeueAllDead checks each
// dead value before it requeues it; a compaction that copies the values
// forward and cuts the log behind them meanwhile must not make it refuse
// a readable value: the check follows the copy.
func TestSortedRequeueAllDeadWhileCopiedForward(t *testing.T) {
	fsys := &gateFS{}
	s := openUncachedSorted(t, fsys)
	defer s.Close()
	ctx := context.Background()
	for i := range int64(3) {
		require.NoError(t, s.Publish(ctx, i, "dead", []byte(fmt.Sprintf("dead%d|%s", i, bytes.Repeat([]byte("d"), 900)))))
	}
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.NoError(t, bs[0].Nack(0))
	for i := range 12 {
		require.NoError(t, s.Publish(ctx, 100, fmt.Sprint("busy", i), bytes.Repeat([]byte("b"), 3000)))
		bs, err := s.TryPull(10)
		require.NoError(t, err)
		require.NoError(t, bs[0].Ack())
	}
	n, err := whileReadHeld(t, fsys, s.RequeueAllDead, func() {
		require.NoError(t, s.Compact())
		require.GreaterOrEqual(t, s.Stats().Moved, uint64(3))
	})
	require.NoError(t, err)
	require.Equal(t, 3, n)
}

// deadValuesOutOfCache opens a sorted queue on fsys with three dead
// values, pushed out of the log's entry cache, and acked values behind
// them for a compaction to drop, and returns it with the dead values.
func deadValuesOutOfCache(t *testing.T, fsys *gateFS) (*queue.Sorted[int64], []queue.DeadValue[int64]) {
	t.Helper()
	s := openUncachedSorted(t, fsys)
	ctx := context.Background()
	for i := range int64(3) {
		require.NoError(t, s.Publish(ctx, i, "dead", []byte(fmt.Sprintf("dead%d|%s", i, bytes.Repeat([]byte("d"), 900)))))
	}
	bs, err := s.TryPull(10)
	require.NoError(t, err)
	require.NoError(t, bs[0].Nack(0))
	dead, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Len(t, dead, 3)
	for i := range 12 {
		require.NoError(t, s.Publish(ctx, 100, fmt.Sprint("busy", i), bytes.Repeat([]byte("b"), 3000)))
		bs, err := s.TryPull(10)
		require.NoError(t, err)
		require.NoError(t, bs[0].Ack())
	}
	return s, dead
}

// TestSortedRequeueAllDeadBesidePurgeAndCompact: a dead value purged
// while RequeueAllDead checks the values, and compacted out of the log,
// is gone: RequeueAllDead requeues the others and does not fail.
func TestSortedRequeueAllDeadBesidePurgeAndCompact(t *testing.T) {
	fsys := &gateFS{}
	s, dead := deadValuesOutOfCache(t, fsys)
	defer s.Close()
	n, err := whileReadHeld(t, fsys, s.RequeueAllDead, func() {
		require.NoError(t, s.PurgeDead(dead[1].Seq))
		require.NoError(t, s.Compact())
	})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	left, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	require.Empty(t, left)
}

// openUncachedSorted opens a sorted queue on fsys with no payload cache
// (every payload is read from the log), 4 KiB segments, MaxDeliveries 1
// and compaction only when the test calls it.
func openUncachedSorted(t *testing.T, fsys *gateFS) *queue.Sorted[int64] {
	t.Helper()
	o := queue.SortedOptions{
		Options:    queue.Options{Sync: queue.SyncAlways, SegmentSize: 4096, MaxDeliveries: 1, FS: fsys},
		CacheBytes: -1,
	}
	testhook.SetManualCompaction(&o.Options)
	s, err := queue.OpenSorted[int64](t.TempDir(), &o)
	require.NoError(t, err)
	return s
}

// deadValueSeqs lists DeadValues(0, max) with the next read of the log
// held while meanwhile runs, and returns the seqs it listed.
func deadValueSeqs(t *testing.T, s *queue.Sorted[int64], fsys *gateFS, max int, meanwhile func()) []uint64 {
	t.Helper()
	var dvs []queue.DeadValue[int64]
	_, err := whileReadHeld(t, fsys, func() (int, error) {
		var err error
		dvs, err = s.DeadValues(0, max)
		return len(dvs), err
	}, meanwhile)
	require.NoError(t, err)
	seqs := []uint64{}
	for _, d := range dvs {
		seqs = append(seqs, d.Seq)
	}
	return seqs
}

// TestDeadValuesPageBesidePurge is TestDeadLettersPageBesidePurge of a
// sorted queue's dead values.
func TestDeadValuesPageBesidePurge(t *testing.T) {
	for _, compact := range []bool{false, true} {
		t.Run(fmt.Sprint("compact=", compact), func(t *testing.T) {
			fsys := &gateFS{}
			s, dead := deadValuesOutOfCache(t, fsys)
			defer s.Close()
			seqs := deadValueSeqs(t, s, fsys, 2, func() {
				require.NoError(t, s.PurgeDead(dead[1].Seq))
				if compact {
					require.NoError(t, s.Compact())
				}
			})
			require.Equal(t, []uint64{dead[0].Seq, dead[2].Seq}, seqs, "a page of 2 while two values are dead")
		})
	}
}

// TestDeadValuesBesideRequeue is TestDeadLettersBesideRequeue of a sorted
// queue's dead values.
func TestDeadValuesBesideRequeue(t *testing.T) {
	for _, compact := range []bool{false, true} {
		t.Run(fmt.Sprint("compact=", compact), func(t *testing.T) {
			fsys := &gateFS{}
			s, dead := deadValuesOutOfCache(t, fsys)
			defer s.Close()
			seqs := deadValueSeqs(t, s, fsys, 0, func() {
				require.NoError(t, s.RequeueDead(dead[1].Seq))
				if compact {
					require.NoError(t, s.Compact())
				}
			})
			require.Equal(t, []uint64{dead[0].Seq, dead[2].Seq}, seqs)
		})
	}
}
