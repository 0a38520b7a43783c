package queue_test

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/crashfs"
	"github.com/walq/walq/queue"
)

// requireLoggedDeadKept builds states power-loss states of fsys, crashed
// at its durable operation crashAt (the PCG's second word is stream), and
// requires every value logged as dead-lettered to be in the dead set that
// dead reads from the reopened queue directory: the log never claims a
// move the disk may not keep. A state with a hole that is not a torn write
// over the zeros ahead of the tail (later bytes kept after lost ones) may
// be refused with ErrCorrupt instead: nothing tells such a hole from
// damage, and a refused queue delivers nothing.
func requireLoggedDeadKept[T comparable](t *testing.T, fsys *crashfs.FS, crashAt, states int, stream uint64,
	logged []T, dead func(t *testing.T, dir string) ([]T, error)) {
	t.Helper()
	require.NoError(t, fsys.Image())
	for s := range states {
		seed := uint64(crashAt*100 + s)
		dst := filepath.Join(t.TempDir(), "q")
		st, err := fsys.Materialize(dst, rand.New(rand.NewPCG(seed, stream)))
		require.NoError(t, err)
		got, err := dead(t, filepath.Join(dst, "q"))
		if err != nil {
			require.True(t, st.Holes && !st.OverZeros && errors.Is(err, queue.ErrCorrupt),
				"crash at durable op %d, state seed %d (%s): reopen: %v", crashAt, seed, st.Desc, err)
			continue
		}
		for _, v := range logged {
			require.Contains(t, got, v, "crash at durable op %d, state seed %d: %v logged as dead-lettered, not dead after the reopen (dead: %v)",
				crashAt, seed, v, got)
		}
	}
}
