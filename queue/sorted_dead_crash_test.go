package queue_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/queue"
)

// TestSortedDeadLogFollowsDisk: a batch dead-letter, and a pull that
// MaxDeliveries keeps from values (which it dead-letters on its way), log
// each value they dead-letter ("queue: value dead-lettered") only once
// its record is as durable as the sync mode promises. A power loss at any
// durable operation of the open, the pull, the dead-letter and the Close
// leaves a directory whose reopened queue holds every value so logged in
// its dead set, also when the fsync of the dead-letter's record is the
// one that fails. Every durable operation is a crash point; each has its
// synced state and 10 random ones, 3 under the race detector.
func TestSortedDeadLogFollowsDisk(t *testing.T) {
	for _, c := range []struct {
		name  string
		limit int                                // MaxDeliveries of the open that crashes
		prep  func(t *testing.T, src string)     // the queue before it
		run   func(s *queue.Sorted[int64]) error // what dead-letters
	}{
		{"batch dead-letter", 0, func(t *testing.T, src string) { publishTwo(t, src, false) }, deadLetterBatch},
		{"pull at MaxDeliveries", 1, func(t *testing.T, src string) { publishTwo(t, src, true) }, func(s *queue.Sorted[int64]) error {
			_, err := s.TryPull(10)
			if errors.Is(err, queue.ErrEmpty) {
				return nil // both were dead-lettered, none is left to deliver
			}
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "q")
			c.prep(t, src)
			crashSorted(t, src, c.limit, c.run)
		})
	}
}

// publishTwo makes a sorted queue in src holding two values of key "k",
// pulled and nacked once if nacked.
func publishTwo(t *testing.T, src string, nacked bool) {
	t.Helper()
	s, err := queue.OpenSorted[int64](src, nil)
	require.NoError(t, err)
	require.NoError(t, s.Publish(context.Background(), 1, "k", []byte("a")))
	require.NoError(t, s.Publish(context.Background(), 2, "k", []byte("b")))
	if nacked {
		bs, err := s.TryPull(10)
		require.NoError(t, err)
		require.NoError(t, bs[0].Nack(0))
	}
	require.NoError(t, s.Close())
}

// crashSorted crashes an open of the sorted queue in src (a copy) and run
// at each durable operation in turn, and requires every value logged as
// dead-lettered to be dead in each crash state.
func crashSorted(t *testing.T, src string, limit int, run func(s *queue.Sorted[int64]) error) {
	states := 10
	if raceEnabled {
		states = 3
	}
	for crashAt := 1; ; crashAt++ {
		root := t.TempDir()
		copyTree(t, src, filepath.Join(root, "q"))
		fsys, err := crashfs.New(root, crashAt)
		require.NoError(t, err)
		logger, logs := newLogger(slog.LevelInfo)
		s, err := queue.OpenSorted[int64](filepath.Join(root, "q"), &queue.SortedOptions{Options: queue.Options{
			FS: fsys, Logger: logger, MaxDeliveries: limit}})
		if err == nil {
			err = run(s)
			err = errors.Join(err, s.Close())
		}
		var logged []uint64
		for _, l := range logs.lines(t, "queue: value dead-lettered") {
			logged = append(logged, uint64(l["seq"].(float64)))
		}
		if !fsys.Crashed() {
			require.NoError(t, err)
			require.Len(t, logged, 2, "without a crash both values are logged")
			t.Logf("%d durable operations, %d crash states each", crashAt-1, states)
			return
		}
		requireLoggedDeadKept(t, fsys, crashAt, states, 31, logged, deadSeqs)
	}
}

// deadLetterBatch pulls the batch of s and dead-letters it.
func deadLetterBatch(s *queue.Sorted[int64]) error {
	bs, err := s.TryPull(10)
	if err != nil {
		return err
	}
	return bs[0].DeadLetter("poison")
}

// deadSeqs opens the sorted queue in dir and returns the Seq of each of
// its dead values.
func deadSeqs(t *testing.T, dir string) ([]uint64, error) {
	t.Helper()
	s, err := queue.OpenSorted[int64](dir, nil)
	if err != nil {
		return nil, err
	}
	defer func() { require.NoError(t, s.Close()) }()
	ds, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	var seqs []uint64
	for _, d := range ds {
		seqs = append(seqs, d.Seq)
	}
	return seqs, nil
}
