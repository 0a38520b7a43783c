package queue_test

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/internal/crashfs"
)

// requireLoggedDeadKept builds states power-loss states of fsys, crashed
// at its durable operation crashAt (the PCG's second word is stream), and
// requires every value logged as dead-lettered to be in the dead set that
// dead reads from the reopened queue directory: the log never claims a
// move the disk may not keep.
func requireLoggedDeadKept[T comparable](t *testing.T, fsys *crashfs.FS, crashAt, states int, stream uint64,
	logged []T, dead func(t *testing.T, dir string) []T) {
	t.Helper()
	require.NoError(t, fsys.Image())
	for s := range states {
		seed := uint64(crashAt*100 + s)
		dst := filepath.Join(t.TempDir(), "q")
		_, err := fsys.Materialize(dst, rand.New(rand.NewPCG(seed, stream)))
		require.NoError(t, err)
		got := dead(t, filepath.Join(dst, "q"))
		for _, v := range logged {
			require.Contains(t, got, v, "crash at durable op %d, state seed %d: %v logged as dead-lettered, not dead after the reopen (dead: %v)",
				crashAt, seed, v, got)
		}
	}
}
